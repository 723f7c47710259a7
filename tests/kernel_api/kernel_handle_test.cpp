// sa::Kernel, the suite's only door to a kernel: it must refuse malformed
// descriptors with a message naming the origin and what was expected, pack
// bfloat16 inputs without silently rounding them, report kernel errors with
// the kernel's own text, and never hand back stale output.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/bfloat16.hpp"
#include "core/float16.hpp"
#include "kernels/kernel.hpp"

namespace {

thread_local std::string last;

// A tiny correct-enough softmax for the descriptor tests (float32, bfloat16, float16).
sa_status toy_softmax(void*, sa_dtype dt, const sa_rows* s, const void* in, void* out) {
  if (s->n < 1) {
    last = "n must be >= 1";
    return SA_INVALID_ARGUMENT;
  }
  for (int64_t r = 0; r < s->rows; ++r) {
    std::vector<float> x(static_cast<std::size_t>(s->n));
    for (int64_t i = 0; i < s->n; ++i)
      x[i] = dt == SA_F32 ? static_cast<const float*>(in)[r * s->in_stride + i]
             : dt == SA_F16
                 ? sa::float_from_f16(static_cast<const uint16_t*>(in)[r * s->in_stride + i])
                 : sa::float_from_bf16(static_cast<const uint16_t*>(in)[r * s->in_stride + i]);
    float m = -INFINITY, S = 0;
    for (float v : x) m = std::max(m, v);
    for (float& v : x) S += (v = std::exp((v - m) / static_cast<float>(s->temperature)));
    for (int64_t i = 0; i < s->n; ++i) {
      if (dt == SA_F32)
        static_cast<float*>(out)[r * s->out_stride + i] = x[i] / S;
      else if (dt == SA_F16)
        static_cast<uint16_t*>(out)[r * s->out_stride + i] = sa::f16_from_float(x[i] / S);
      else
        static_cast<uint16_t*>(out)[r * s->out_stride + i] = sa::bf16_from_float(x[i] / S);
    }
  }
  return SA_OK;
}

const char* toy_error(void*) { return last.c_str(); }

sa_kernel toy() {
  sa_kernel k{};
  k.abi_version = SA_KERNEL_ABI_VERSION;
  k.struct_size = sizeof(sa_kernel);
  k.name = "toy";
  k.ops = SA_OP_SOFTMAX;
  k.dtypes = SA_DTYPE_F32 | SA_DTYPE_BF16 | SA_DTYPE_F16;
  k.memory = SA_MEMORY_HOST;
  k.softmax = toy_softmax;
  k.last_error = toy_error;
  return k;
}

std::string construct_error(const sa_kernel& k) {
  try {
    sa::Kernel h(&k, "test.so");
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

}  // namespace

// A version 1 descriptor (what a plugin built against the version 1 header
// hands over) is read only up to SA_KERNEL_V1_SIZE and loads as before; it
// cannot claim version 2 operations.
TEST(KernelHandle, Version1DescriptorsLoadAndAreReadOnlyUpToTheirSize) {
  sa_kernel k = toy();
  k.abi_version = 1;
  k.struct_size = SA_KERNEL_V1_SIZE;
  // Whatever follows a version 1 descriptor in memory is not the kernel's:
  // garbage there must not be read.
  std::memset(reinterpret_cast<char*>(&k) + SA_KERNEL_V1_SIZE, 0xab,
              sizeof(sa_kernel) - SA_KERNEL_V1_SIZE);
  EXPECT_EQ(construct_error(k), "");
  const sa::Kernel h(&k, "v1.so");
  EXPECT_EQ(h.abi_version(), 1u);
  EXPECT_TRUE(h.supports(sa::Op::softmax));
  EXPECT_FALSE(h.supports(sa::Op::attention_v2));
  sa::AttentionCase c;
  c.seqlen_q = c.seqlen_k = 1;
  c.d = c.dv = 1;
  c.q = c.k = c.v = {1.0f};
  EXPECT_NE(h.why_not_applicable(c).find("interface v1"), std::string::npos);
  EXPECT_THROW(h.attention_v2(c), sa::NotApplicable);
  k.ops |= SA_OP_ATTENTION_V2;
  EXPECT_NE(construct_error(k).find("ABI version 1 does not have"), std::string::npos)
      << construct_error(k);
  k.ops = SA_OP_SOFTMAX;
  k.struct_size = sizeof(sa_kernel);  // a version 1 kernel has exactly the version 1 size
  EXPECT_NE(construct_error(k).find("ABI version 1 with sa_kernel of"), std::string::npos);
}

TEST(KernelHandle, RejectsMalformedDescriptors) {
  sa_kernel k = toy();
  k.abi_version = 99;
  EXPECT_NE(construct_error(k).find("ABI version 99 is newer than this softmax-audit's 2"),
            std::string::npos)
      << construct_error(k);
  k.abi_version = 0;
  EXPECT_NE(construct_error(k).find("ABI version 0, expected 1 or 2"), std::string::npos)
      << construct_error(k);
  k = toy();
  k.struct_size = 8;
  EXPECT_NE(construct_error(k).find("sa_kernel of 8 bytes, expected at least"), std::string::npos)
      << construct_error(k);
  k = toy();
  k.name = "";
  EXPECT_NE(construct_error(k).find("name is empty"), std::string::npos);
  k = toy();
  k.ops |= SA_OP_ENTROPY;  // claimed but NULL
  EXPECT_NE(construct_error(k).find("claims entropy but the function pointer is NULL"),
            std::string::npos)
      << construct_error(k);
  k = toy();
  k.ops = 0;  // pointer set but not claimed
  EXPECT_NE(construct_error(k).find("does not claim softmax but the function pointer is set"),
            std::string::npos);
  EXPECT_NE(construct_error(k).find("test.so"), std::string::npos);
  EXPECT_EQ(construct_error(toy()), "");
}

// Enum fields of a descriptor come from a plugin's bytes. Claim: a value
// outside the enum is refused naming the plugin, and reading it is no
// undefined behaviour (the sanitize build's UBSan fails this test otherwise;
// found by fuzz/descriptor, input fuzz/corpus/descriptor/ub-memory-enum-1).
TEST(KernelHandle, RejectsEnumFieldsOutsideTheirRange) {
  for (std::int32_t bad : {-1, 2, 7}) {
    sa_kernel k = toy();
    std::memcpy(&k.memory, &bad, sizeof bad);
    const std::string m = construct_error(k);
    EXPECT_NE(m.find("test.so"), std::string::npos) << m;
    EXPECT_NE(m.find("memory is"), std::string::npos) << m;
    k = toy();
    std::memcpy(&k.adaptive_entropy, &bad, sizeof bad);
    const std::string e = construct_error(k);
    EXPECT_NE(e.find("adaptive_entropy is"), std::string::npos) << e;
  }
  sa_kernel k = toy();
  k.adaptive_entropy = SA_ENTROPY_PAPER_EPS;
  EXPECT_EQ(construct_error(k), "");
}

// A kernel may return any int as its status. Claim: one outside sa_status is
// a KernelError with status SA_INTERNAL_ERROR whose text has the number, and
// reading it is no undefined behaviour (found by fuzz/descriptor, input
// fuzz/corpus/descriptor/ub-status-enum-1).
TEST(KernelHandle, StatusOutsideTheEnumIsAnInternalError) {
  sa_kernel k = toy();
  // As a C plugin returns it (in C an enum is an int); no load of it here.
  k.softmax = [](void*, sa_dtype, const sa_rows*, const void*, void*) {
    return static_cast<sa_status>(77);
  };
  const sa::Kernel h(&k, "test.so");
  try {
    h.softmax(sa::DType::float32, sa::RowBatch::single({1.0f, 2.0f}));
    ADD_FAILURE() << "no KernelError";
  } catch (const sa::KernelError& e) {
    EXPECT_EQ(e.status, SA_INTERNAL_ERROR);
    EXPECT_NE(std::string(e.what()).find("returned 77"), std::string::npos) << e.what();
  }
}

TEST(KernelHandle, CallsThroughTheAbiWithStrides) {
  const sa_kernel k = toy();
  sa::Kernel h(&k, "built-in");
  sa::RowBatch b;
  b.rows = 2, b.n = 3, b.stride = 5;
  b.data = {0, 1, 2, 99, 99, 5, 5, 5, 99, 99};
  const auto out = h.softmax(sa::DType::float32, b);
  ASSERT_EQ(out.size(), 10u);
  EXPECT_NEAR(out[0] + out[1] + out[2], 1.0f, 1e-6f);
  EXPECT_FLOAT_EQ(out[5], 1.0f / 3.0f);
  EXPECT_TRUE(std::isnan(out[3])) << "padding must stay untouched (NaN sentinel)";
}

TEST(KernelHandle, RefusesInputsThatAreNotBFloat16) {
  const sa_kernel k = toy();
  sa::Kernel h(&k, "built-in");
  const auto ok = h.softmax(sa::DType::bfloat16, sa::RowBatch::single({1.0f, 2.0f, 0.5f}));
  EXPECT_EQ(ok.size(), 3u);
  EXPECT_EQ(sa::round_to_bf16(ok[0]), ok[0]);
  try {
    h.softmax(sa::DType::bfloat16, sa::RowBatch::single({1.0f, 0.1f}));
    FAIL() << "0.1 is not a bfloat16 value";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("logits[1]"), std::string::npos) << e.what();
  }
}

// float16 (IEEE binary16): packed exactly like bfloat16, with its own
// representability check (naming the element), outputs widened exactly; the
// dtype bit decides supports(). Two strided rows, one with a subnormal logit.
TEST(KernelHandle, Float16PacksExactlyAndRefusesOtherValues) {
  const sa_kernel k = toy();
  sa::Kernel h(&k, "built-in");
  EXPECT_TRUE(h.supports(sa::DType::float16));
  const float sub = std::ldexp(1.0f, -20);  // a float16 subnormal: passed through exactly
  sa::RowBatch b;
  b.rows = 2;
  b.n = 2;
  b.stride = 6;
  b.data = {1.0f, 2.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.5f, sub, 0.0f, 0.0f, 0.0f, 0.0f};
  const auto out = h.softmax(sa::DType::float16, b);
  ASSERT_EQ(out.size(), 12u);
  for (float v : {out[0], out[1], out[6], out[7]}) EXPECT_EQ(sa::round_to_f16(v), v);
  EXPECT_EQ(out[0], sa::round_to_f16(static_cast<float>(1.0 / (1.0 + std::exp(1.0)))));
  for (const auto& [v, what] : {std::pair{0.1f, "0.1"}, std::pair{70000.0f, "70000 (> 65504)"},
                                std::pair{std::ldexp(1.0f, -26), "2^-26 (below 2^-24)"},
                                std::pair{1.0f + std::ldexp(1.0f, -12), "1 + 2^-12"}}) {
    try {
      h.softmax(sa::DType::float16, sa::RowBatch::single({1.0f, v}));
      ADD_FAILURE() << what << " is not a float16 value";
    } catch (const std::invalid_argument& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("logits[1]"), std::string::npos) << m;
      EXPECT_NE(m.find("float16"), std::string::npos) << m;
    }
  }
  // A bfloat16 value that float16 cannot hold (2^-30) is refused for float16 only.
  const float tiny = std::ldexp(1.0f, -30);
  EXPECT_NO_THROW(h.softmax(sa::DType::bfloat16, sa::RowBatch::single({1.0f, tiny})));
  EXPECT_THROW(h.softmax(sa::DType::float16, sa::RowBatch::single({1.0f, tiny})),
               std::invalid_argument);
  sa_kernel k2 = toy();
  k2.dtypes = SA_DTYPE_F32;
  sa::Kernel h2(&k2, "built-in");
  EXPECT_FALSE(h2.supports(sa::DType::float16));
  EXPECT_THROW(h2.softmax(sa::DType::float16, sa::RowBatch::single({1.0f})), sa::KernelError);
  // A kernel that declares float16 alone is a valid descriptor.
  sa_kernel k3 = toy();
  k3.dtypes = SA_DTYPE_F16;
  EXPECT_EQ(construct_error(k3), "");
}

TEST(KernelHandle, ReportsKernelErrorsAndUnsupportedOps) {
  const sa_kernel k = toy();
  sa::Kernel h(&k, "built-in");
  sa::RowBatch empty;
  empty.rows = 1, empty.n = 0, empty.stride = 0;
  try {
    h.softmax(sa::DType::float32, empty);
    FAIL();
  } catch (const sa::KernelError& e) {
    EXPECT_EQ(e.status, SA_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("n must be >= 1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(h.entropy(sa::DType::float32, sa::RowBatch::single({1.0f})), sa::KernelError);
  EXPECT_THROW(h.softmax(sa::DType::float64, sa::RowBatch::single({1.0f})), sa::KernelError);
}

TEST(KernelHandle, PluginLoadErrorsNameTheFile) {
  try {
    sa::load_plugin("/nonexistent/libkernel.so");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/libkernel.so"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("softmax_audit/kernel.h"), std::string::npos);
  }
}

TEST(KernelHandle, OpNames) {
  for (sa::Op op : sa::all_ops) EXPECT_EQ(sa::parse_op(sa::name_of(op)), op);
  EXPECT_FALSE(sa::parse_op("softmx").has_value());
}

// Issue 29, item 2: a row longer than sa_capabilities.max_n is not applicable
// (kernel.h): the handle throws sa::NotApplicable naming the limit, and the
// kernel is never called with it.
TEST(KernelHandle, RowsLongerThanMaxNAreNotApplicableAndNeverReachTheKernel) {
  static int calls = 0;
  sa_kernel k = toy();
  k.softmax = [](void* ctx, sa_dtype dt, const sa_rows* s, const void* in, void* out) {
    ++calls;
    return toy_softmax(ctx, dt, s, in, out);
  };
  sa_capabilities caps{};
  caps.struct_size = sizeof caps;
  caps.max_n = 8;
  k.capabilities = &caps;
  const sa::Kernel h(&k, "max_n.so");
  EXPECT_EQ(h.max_n(), 8);
  calls = 0;
  EXPECT_EQ(h.softmax(sa::DType::float32, sa::RowBatch::single(std::vector<float>(8, 1.0f))).size(),
            8u);
  EXPECT_EQ(calls, 1);
  try {
    h.softmax(sa::DType::float32, sa::RowBatch::single(std::vector<float>(9, 1.0f)));
    ADD_FAILURE() << "a row of 9 > max_n 8 was run";
  } catch (const sa::NotApplicable& e) {
    EXPECT_NE(std::string(e.what()).find("max_n 8"), std::string::npos) << e.what();
  }
  EXPECT_EQ(calls, 1) << "the kernel was called with a row above its max_n";
  caps.max_n = 0;  // no limit
  EXPECT_EQ(h.softmax(sa::DType::float32, sa::RowBatch::single(std::vector<float>(9, 1.0f))).size(),
            9u);
}

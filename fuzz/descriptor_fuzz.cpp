// Fuzzes the plugin descriptor validation (kernels/kernel.cpp, sa::Kernel's
// constructor): an sa_kernel built field by field from the bytes (any ABI
// version, struct size, name, ops and dtypes bits, memory and entropy enum
// values, any set of function pointers) must be accepted or refused with
// std::invalid_argument naming the origin; an accepted one is then used
// through sa::Kernel (description, supports, one call of each op it claims in
// a fuzzed element type: float32, bfloat16 or float16, whose stub fails with a
// fuzzed error text) without a crash or UB.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/kernel.hpp"

namespace {

std::string g_error;  // what the stub kernel's last_error returns

sa_status rows_stub(void*, sa_dtype, const sa_rows*, const void*, void*) {
  return SA_INVALID_ARGUMENT;
}
sa_status lse_stub(void*, sa_dtype, const sa_rows*, const void*, float*) { return SA_UNSUPPORTED; }
sa_status entropy_stub(void*, sa_dtype, const sa_rows*, const void*, float*, sa_entropy_state*) {
  return SA_INTERNAL_ERROR;
}
sa_status adaptive_stub(void*, sa_dtype, const sa_rows*, const void*, void*, float*, float*) {
  return static_cast<sa_status>(77);  // a status the ABI does not define
}
sa_status attention_stub(void*, const sa_attention_args*) { return SA_INVALID_ARGUMENT; }
sa_status merge_entropy_stub(void*, std::int64_t, const sa_entropy_state*, const sa_entropy_state*,
                             sa_entropy_state*) {
  return SA_INVALID_ARGUMENT;
}
sa_status merge_attention_stub(void*, std::int64_t, std::int64_t, const float*, const float*,
                               const float*, const float*, float*, float*) {
  return SA_INVALID_ARGUMENT;
}
const char* last_error_stub(void*) { return g_error.c_str(); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider fd(data, size);
  sa_kernel k;
  std::memset(&k, 0, sizeof k);
  const bool good_header = fd.ConsumeBool();
  k.abi_version = good_header ? SA_KERNEL_ABI_VERSION : fd.ConsumeIntegral<std::uint32_t>();
  k.struct_size = good_header ? sizeof(sa_kernel) : fd.ConsumeIntegral<std::uint32_t>();
  const std::string name = fd.ConsumeRandomLengthString(64);
  const std::string description = fd.ConsumeRandomLengthString(64);
  g_error = fd.ConsumeRandomLengthString(64);
  const std::uint8_t which_strings = fd.ConsumeIntegral<std::uint8_t>();
  k.name = which_strings & 1 ? nullptr : name.c_str();
  k.description = which_strings & 2 ? nullptr : description.c_str();
  k.ops = fd.ConsumeIntegral<std::uint32_t>();
  k.dtypes = fd.ConsumeIntegral<std::uint32_t>();
  // Enum fields hold whatever the plugin's bytes say: copy raw integers in.
  const std::int32_t memory = fd.ConsumeIntegralInRange<std::int32_t>(-2, 3);
  const std::int32_t entropy = fd.ConsumeIntegralInRange<std::int32_t>(-2, 3);
  std::memcpy(&k.memory, &memory, sizeof memory);
  std::memcpy(&k.adaptive_entropy, &entropy, sizeof entropy);
  const std::uint16_t pointers = fd.ConsumeIntegral<std::uint16_t>();
  if (pointers & 1) k.softmax = rows_stub;
  if (pointers & 2) k.log_softmax = rows_stub;
  if (pointers & 4) k.logsumexp = lse_stub;
  if (pointers & 8) k.entropy = entropy_stub;
  if (pointers & 16) k.adaptive_softmax = adaptive_stub;
  if (pointers & 32) k.attention = attention_stub;
  if (pointers & 64) k.merge_entropy_states = merge_entropy_stub;
  if (pointers & 128) k.merge_attention_states = merge_attention_stub;
  if (pointers & 256) k.last_error = last_error_stub;
  // The element type of the calls below: every type the interface carries
  // (SA_F16 included), whatever the fuzzed dtypes bits claim.
  constexpr sa::DType call_types[] = {sa::DType::float32, sa::DType::bfloat16, sa::DType::float16};
  const sa::DType ct = call_types[fd.ConsumeIntegralInRange<int>(0, 2)];

  try {
    const sa::Kernel kernel(&k, "fuzz-plugin.so");
    (void)kernel.description();
    (void)kernel.memory();
    (void)kernel.adaptive_entropy();
    for (sa::DType t : {sa::DType::float32, sa::DType::bfloat16, sa::DType::float16})
      (void)kernel.supports(t);
    const sa::RowBatch batch = sa::RowBatch::single({0.5f, -1.0f, 2.0f});
    for (sa::Op op : sa::all_ops) {
      if (!kernel.supports(op) || kernel.memory() != SA_MEMORY_HOST) continue;
      try {
        switch (op) {
          case sa::Op::softmax:
            kernel.softmax(ct, batch);
            break;
          case sa::Op::log_softmax:
            kernel.log_softmax(ct, batch);
            break;
          case sa::Op::logsumexp:
            kernel.logsumexp(ct, batch);
            break;
          case sa::Op::entropy:
            kernel.entropy(ct, batch);
            break;
          case sa::Op::adaptive_softmax:
            kernel.adaptive_softmax(ct, batch);
            break;
          default:
            break;  // attention and merges: covered by kernel_ops_fuzz
        }
      } catch (const sa::KernelError&) {
      }
    }
  } catch (const std::invalid_argument& e) {
    if (std::string(e.what()).find("fuzz-plugin.so") == std::string::npos) __builtin_trap();
  }
  return 0;
}

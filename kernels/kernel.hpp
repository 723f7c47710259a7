// The suite's C++ view of a kernel under test. Everything in the suite that
// runs a kernel goes through sa::Kernel, which goes through the C ABI in
// include/softmax_audit/kernel.h and nothing else: built-in kernels and
// plugins built elsewhere are treated identically.
//
// sa::Kernel takes and returns host float buffers. For SA_BF16 and SA_F16 the
// inputs must already be bfloat16 / float16 values (the handle packs them
// without rounding and throws, naming the element, if one is not); outputs
// come back widened to float exactly. For
// kernels whose memory is SA_MEMORY_CUDA the handle stages buffers through
// device memory (see device_memory()), or throws KernelUnavailable when no
// device is present.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "core/attention_case.hpp"
#include "core/dtype.hpp"
#include "softmax_audit/kernel.h"

namespace sa {

enum class Op {
  softmax,
  log_softmax,
  logsumexp,
  entropy,
  adaptive_softmax,
  attention,
  merge_entropy_states,
  merge_attention_states,
  // Interface v2 (a version 1 kernel has none of these).
  attention_v2,
  softmax_backward,
  log_softmax_backward,
  attention_backward,
  merge_attention_states_n
};
// The per-dtype operations of interface v1 (the suite runs its row, attention
// and merge families over these for each dtype).
constexpr Op all_ops[] = {Op::softmax,
                          Op::log_softmax,
                          Op::logsumexp,
                          Op::entropy,
                          Op::adaptive_softmax,
                          Op::attention,
                          Op::merge_entropy_states,
                          Op::merge_attention_states};
// Every operation the suite checks: all_ops, batched attention (v2), which
// carries its own element types, the n-way split-KV merge and the
// backward operations.
constexpr Op checked_ops[] = {Op::softmax,
                              Op::log_softmax,
                              Op::logsumexp,
                              Op::entropy,
                              Op::adaptive_softmax,
                              Op::attention,
                              Op::merge_entropy_states,
                              Op::merge_attention_states,
                              Op::attention_v2,
                              Op::merge_attention_states_n,
                              Op::softmax_backward,
                              Op::log_softmax_backward,
                              Op::attention_backward};
// Every operation kernel.h defines (bit k of sa_kernel.ops is the k-th).
constexpr Op all_interface_ops[] = {Op::softmax,
                                    Op::log_softmax,
                                    Op::logsumexp,
                                    Op::entropy,
                                    Op::adaptive_softmax,
                                    Op::attention,
                                    Op::merge_entropy_states,
                                    Op::merge_attention_states,
                                    Op::attention_v2,
                                    Op::softmax_backward,
                                    Op::log_softmax_backward,
                                    Op::attention_backward,
                                    Op::merge_attention_states_n};
const char* name_of(Op op);
std::optional<Op> parse_op(std::string_view s);
std::uint32_t op_bit(Op op);

// A kernel call returned an error status; what() includes the kernel's last_error text.
class KernelError : public std::runtime_error {
 public:
  KernelError(sa_status status, const std::string& what)
      : std::runtime_error(what), status(status) {}
  sa_status status;
};

// The case is outside what the kernel declares it supports (sa_capabilities):
// not applicable, so never run, never an error, never a pass.
class NotApplicable : public std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The kernel cannot run here (e.g. a CUDA kernel without a device); a skip, not a failure.
class KernelUnavailable : public std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Copies to and from device memory for SA_MEMORY_CUDA kernels. Null when this
// build has no CUDA support or no device is present.
struct DeviceMemory {
  void* (*alloc)(std::size_t bytes);
  void (*free)(void* p);
  void (*to_device)(void* dst, const void* src, std::size_t bytes);
  void (*to_host)(void* dst, const void* src, std::size_t bytes);
  const char* (*why_unavailable)();  // set even when the rest is null
};
const DeviceMemory& device_memory();

// Rows of logits in host memory: rows x n, row r at data[r * stride].
//
// How the call lays out its output (kernel.h lets a caller choose both, and
// the suite exercises both): out_stride is the output's row stride (0: the
// same as `stride`); in_place passes the input buffer as the output too
// (in == out; out_stride is then `stride`). Outputs always come back in the
// input's layout, so properties read them the same way whatever the call's
// layout was. After the call the handle checks that the kernel left every
// element between output rows (the gap of a stride > n) untouched, and
// throws KernelError otherwise (kernel.h: row r of out is out[r*out_stride ..
// r*out_stride + n)).
struct RowBatch {
  std::int64_t rows = 1;
  std::int64_t n = 0;
  std::int64_t stride = 0;  // >= n
  std::vector<float> data;  // rows * stride values
  std::int64_t out_stride = 0;
  bool in_place = false;

  static RowBatch single(std::vector<float> row);
  std::span<const float> row(std::int64_t r) const {
    return {data.data() + r * stride, static_cast<std::size_t>(n)};
  }
};

struct AdaptiveOutput {
  std::vector<float> weights;  // same layout as the input batch
  std::vector<float> beta, entropy;
};

// Gradients of one attention_backward call (interface v2), packed BSHD as
// core/attention_case.hpp: dq like q, dk like k, dv like v; dsinks per query
// head (empty without sinks).
struct AttentionBackwardResult {
  std::vector<float> dq, dk, dv, dsinks;
};

// Wall seconds this process has spent inside kernel calls made through any
// sa::Kernel (for a kernel the gate hosts in another process: each call's
// round trip to the host, the protection and copies of its buffers included).
// Only grows; the property suite reports the growth per verdict
// (Verdict::kernel_seconds), so a user sees which share of a property's time
// was the kernel's and which the judge's.
double kernel_call_seconds();

class Kernel {
 public:
  // Validates the descriptor (ABI version, struct size, name, that ops and
  // dtypes agree with the function pointers); throws std::invalid_argument
  // naming `origin` (a plugin path or "built-in") and what was expected.
  Kernel(const sa_kernel* k, std::string origin, std::shared_ptr<void> library = {});

  const std::string& name() const { return name_; }
  const std::string& origin() const { return origin_; }
  std::string description() const;
  bool supports(Op op) const;
  bool supports(DType t) const;
  sa_memory memory() const { return k_->memory; }
  sa_entropy_definition adaptive_entropy() const { return k_->adaptive_entropy; }
  const sa_kernel& raw() const { return *k_; }
  // The ABI version the kernel was built against (1 or 2); fields after
  // `last_error` exist only from version 2 on.
  std::uint32_t abi_version() const { return abi_; }

  std::vector<float> softmax(DType t, const RowBatch& in, double temperature = 1.0) const;
  std::vector<float> log_softmax(DType t, const RowBatch& in, double temperature = 1.0) const;
  std::vector<float> logsumexp(DType t, const RowBatch& in, double temperature = 1.0) const;
  // Entropy per row, and the final (m, S, T) state per row.
  std::vector<float> entropy(DType t, const RowBatch& in, double temperature = 1.0,
                             std::vector<sa_entropy_state>* states = nullptr) const;
  AdaptiveOutput adaptive_softmax(DType t, const RowBatch& in, double temperature = 1.0) const;
  // Single-head attention (the interface v1 slot, sa_kernel.attention) on the
  // case type of attention_v2: a case of one sequence and one head with the
  // features v1 carries (causal bottom-right, key padding mask, head_dim_v,
  // row strides, adaptive, num_splits) becomes one v1 call. Throws
  // NotApplicable for any other case (why_not_applicable_v1 says why),
  // KernelError for a failed call or a write outside the output rows. lse,
  // entropy and beta always come back.
  AttentionResult attention(const AttentionCase& c) const;
  std::string why_not_applicable_v1(const AttentionCase& c) const;
  // Batched attention (interface v2). Throws NotApplicable for a case outside
  // the kernel's capabilities (why_not_applicable says why), KernelError for a
  // failed call or a write outside the output rows. lse and entropy come back
  // empty when the kernel does not declare them.
  AttentionResult attention_v2(const AttentionCase& c) const;
  // Empty when the kernel can run the case; else the reason, in words.
  std::string why_not_applicable(const AttentionCase& c) const;
  // Whether the kernel's attention_v2 declares an SA_ATTN_* feature.
  bool declares(std::uint32_t attention_feature) const;
  // The SA_ATTN_* features declared for input type t (attention_features_by_dtype,
  // else attention_features; every feature without capabilities).
  std::uint32_t attention_features(AttnType t) const;
  // The domain fields appended to sa_capabilities, 0 where the kernel's
  // struct predates them (struct_size): attention_required,
  // attention_constraints (SA_ATTN_ONLY_*), head_dim_multiple.
  struct AttentionDomainCaps {
    std::uint32_t required = 0, constraints = 0;
    std::int32_t head_dim_multiple = 0;
  };
  AttentionDomainCaps attention_domain() const;
  // Backward of softmax / log_softmax (interface v2): y is the forward's
  // output in `y`'s layout (values of type t), dy the incoming gradient in the
  // same layout (rows * stride values); returns dx in that layout. Throws
  // KernelError when the op or type is not implemented (capabilities'
  // op_dtypes), or for a write outside dx's rows.
  std::vector<float> softmax_backward(DType t, const RowBatch& y, std::span<const float> dy,
                                      double temperature = 1.0) const;
  std::vector<float> log_softmax_backward(DType t, const RowBatch& y, std::span<const float> dy,
                                          double temperature = 1.0) const;
  // Attention backward (interface v2): `out` and `lse` are the forward's
  // (packed BSHD, total_q x heads_q x dv and total_q x heads_q), `dout` like
  // out. Throws NotApplicable outside the capabilities
  // (why_not_applicable_backward), KernelError for a failed call or a write
  // outside the gradients' rows.
  AttentionBackwardResult attention_backward(const AttentionCase& c, std::span<const float> out,
                                             std::span<const float> lse,
                                             std::span<const float> dout,
                                             bool deterministic = false) const;
  // Empty when the kernel's attention_backward can run the case: the forward's
  // conditions (attention_features cover both directions) plus the op and its
  // element types; adaptive attention and fp8 inputs have no backward here.
  std::string why_not_applicable_backward(const AttentionCase& c) const;
  // Whether the kernel declares an SA_CAP_* flag (v2 capabilities).
  bool claims(std::uint32_t cap_flag) const;
  // sa_capabilities.max_n: the longest row the row operations take (0: no
  // limit). A row-op call with a longer row throws NotApplicable, before the
  // kernel is called.
  std::int64_t max_n() const;
  std::vector<sa_entropy_state> merge_entropy_states(std::span<const sa_entropy_state> a,
                                                     std::span<const sa_entropy_state> b) const;
  // Returns out (rows x dv) and writes the merged lse into *out_lse.
  // alias_a: pass out = o_a and out_lse = lse_a (the aliasing kernel.h allows).
  std::vector<float> merge_attention_states(
      std::int64_t rows, std::int64_t dv, std::span<const float> o_a, std::span<const float> lse_a,
      std::span<const float> o_b, std::span<const float> lse_b, std::vector<float>* out_lse,
      bool alias_a = false) const;
  // The n-way split-KV merge (interface v2): o[p] (rows x dv) and lse[p]
  // (rows) are the parts; returns out (rows x dv) and writes the merged lse
  // into *out_lse. kernels/merge_n_call.cpp.
  std::vector<float> merge_attention_states_n(std::int64_t rows, std::int64_t dv,
                                              const std::vector<std::vector<float>>& o,
                                              const std::vector<std::vector<float>>& lse,
                                              std::vector<float>* out_lse) const;

 private:
  const sa_kernel* k_;
  std::uint32_t abi_ = 1;
  std::string origin_;
  std::string name_;
  std::shared_ptr<void> library_;  // keeps a plugin loaded while any copy lives
};

// Loads a kernel library built against include/softmax_audit/kernel.h.
// index < 0: sa_kernel_entry(), else sa_kernel_entry_at(index). Throws
// std::invalid_argument naming the file and what was expected.
Kernel load_plugin(const std::string& path, int index = -1);
// Every kernel a plugin exports (sa_kernel_entry_at 0.. or the single entry).
std::vector<Kernel> load_plugin_all(const std::string& path);

sa_dtype to_abi(DType t);  // float32 -> SA_F32, bfloat16 -> SA_BF16; throws otherwise

}  // namespace sa

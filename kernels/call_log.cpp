#include "kernels/call_log.hpp"

#include <map>
#include <stdexcept>
#include <utility>

namespace sa::call_log {
namespace {
thread_local Capture* g_current = nullptr;
Sink& sink() {
  static Sink s;
  return s;
}
}  // namespace

bool recording() { return g_current != nullptr; }

void record(Call c) {
  if (g_current) g_current->calls_.push_back(std::move(c));
}

Capture::Capture() : outer_(g_current) { g_current = this; }
Capture::~Capture() { g_current = outer_; }
std::vector<Call> Capture::take() { return std::move(calls_); }

void set_sink(Sink s) { sink() = std::move(s); }

namespace {
thread_local std::map<std::string, std::vector<Call>> g_stash;
}
void stash(const std::string& key, std::vector<Call> calls) {
  // Nothing is kept for a program that writes no case files (no sink): a
  // verdict that is never emitted leaves nothing behind.
  if (sink() && !calls.empty()) g_stash[key] = std::move(calls);
}
std::vector<Call> claim(const std::string& key) {
  const auto it = g_stash.find(key);
  if (it == g_stash.end()) return {};
  std::vector<Call> r = std::move(it->second);
  g_stash.erase(it);
  return r;
}
void publish(const Verdict& v, const std::vector<Call>& calls) {
  if (sink() && !calls.empty()) sink()(v, calls);
}

}  // namespace sa::call_log

namespace sa::call_log {

const Array* find(const std::vector<Array>& v, const std::string& name) {
  for (const auto& a : v)
    if (a.name == name) return &a;
  return nullptr;
}
const Arg* find(const std::vector<Arg>& v, const std::string& name) {
  for (const auto& a : v)
    if (a.name == name) return &a;
  return nullptr;
}

Array floats(std::string name, std::vector<std::int64_t> shape, std::vector<float> values) {
  Array a;
  a.name = std::move(name);
  a.kind = 'f';
  a.shape = std::move(shape);
  a.f = std::move(values);
  return a;
}

namespace {
Arg num(const char* name, double x) { return Arg{name, x, {}}; }
Arg word(const char* name, std::string w) { return Arg{name, 0, std::move(w)}; }
}  // namespace

Call rows_call(const char* op, DType t, std::int64_t rows, std::int64_t n, std::int64_t stride,
               std::int64_t out_stride, bool in_place, double temperature,
               const std::vector<float>& data) {
  Call c;
  c.op = op;
  c.args = {word("dtype", name_of(t)),
            num("rows", static_cast<double>(rows)),
            num("n", static_cast<double>(n)),
            num("stride", static_cast<double>(stride)),
            num("out_stride", static_cast<double>(out_stride)),
            num("in_place", in_place ? 1 : 0),
            num("temperature", temperature)};
  c.inputs.push_back(floats("x", {rows, stride}, data));
  return c;
}

Call attention_call(const char* op, const AttentionCase& a) {
  Call c;
  c.op = op;
  c.args = {word("qkv_dtype", name_of(a.qkv)),
            word("out_dtype", name_of(a.out_type)),
            num("batch", static_cast<double>(a.batch)),
            num("heads_q", static_cast<double>(a.heads_q)),
            num("heads_kv", static_cast<double>(a.heads_kv)),
            num("seqlen_q", static_cast<double>(a.seqlen_q)),
            num("seqlen_k", static_cast<double>(a.seqlen_k)),
            num("head_dim", static_cast<double>(a.d)),
            num("head_dim_v", static_cast<double>(a.dv)),
            num("scale", a.scale),
            num("causal", a.causal ? 1 : 0),
            word("alignment", a.top_left ? "top_left" : "bottom_right"),
            num("window_left", static_cast<double>(a.window_left)),
            num("window_right", static_cast<double>(a.window_right)),
            num("softcap", a.softcap),
            num("q_descale", a.q_descale),
            num("k_descale", a.k_descale),
            num("v_descale", a.v_descale),
            num("adaptive", a.adaptive ? 1 : 0),
            num("num_splits", static_cast<double>(a.num_splits)),
            word("layout", a.layout == AttnLayout::bhsd ? "bhsd" : "bshd"),
            num("row_pad", static_cast<double>(a.row_pad)),
            num("head_pad", static_cast<double>(a.head_pad))};
  const std::int64_t tq = a.total_q(), tk = a.total_k();
  c.inputs.push_back(floats("q", {tq, a.heads_q, a.d}, a.q));
  c.inputs.push_back(floats("k", {tk, a.heads_kv, a.d}, a.k));
  c.inputs.push_back(floats("v", {tk, a.heads_kv, a.dv}, a.v));
  if (a.varlen()) {
    for (const char* nm : {"cu_seqlens_q", "cu_seqlens_k"}) {
      Array x;
      x.name = nm;
      x.kind = 'i';
      x.i32 = nm[11] == 'q' ? a.cu_q : a.cu_k;
      x.shape = {static_cast<std::int64_t>(x.i32.size())};
      c.inputs.push_back(std::move(x));
    }
  }
  if (!a.key_padding_mask.empty()) {
    Array x;
    x.name = "key_padding_mask";
    x.kind = 'u';
    x.u8 = a.key_padding_mask;
    x.shape = {static_cast<std::int64_t>(x.u8.size())};
    c.inputs.push_back(std::move(x));
  }
  if (!a.alibi_slopes.empty())
    c.inputs.push_back(floats("alibi_slopes", {a.heads_q}, a.alibi_slopes));
  if (!a.sinks.empty()) c.inputs.push_back(floats("sinks", {a.heads_q}, a.sinks));
  // Paged KV and seqused_k (issue 33): written only when used, so older case
  // files read as before.
  if (a.paged()) {
    c.args.push_back(num("page_size", static_cast<double>(a.page_size)));
    c.args.push_back(num("page_id_base", static_cast<double>(a.page_id_base)));
    c.args.push_back(num("page_seed", static_cast<double>(a.page_seed)));
  }
  if (a.scale_block > 0) {  // block scales: the values are the products (the call re-derives them)
    c.args.push_back(num("scale_block", static_cast<double>(a.scale_block)));
    if (a.scale_type !=
        ScaleType::e8m0)  // (written only when not E8M0: older files read as before)
      c.args.push_back(num("scale_type", a.scale_type == ScaleType::e4m3 ? 1 : 2));
  }
  if (a.v_in_k) c.args.push_back(num("v_in_k", 1));  // MLA: V a prefix view of K
  // Descales per (sequence, kv head): the values are the products (the call re-derives them).
  if (a.descale_bh) c.args.push_back(num("descale_bh", 1));
  if (a.seqused()) {
    c.args.push_back(num("dense_call", a.dense_call ? 1 : 0));
    Array x;
    x.name = "kv_extra";
    x.kind = 'i';
    x.i32 = a.kv_extra;
    x.shape = {static_cast<std::int64_t>(x.i32.size())};
    c.inputs.push_back(std::move(x));
  }
  // Masks beyond causal and window (issue 33), each by its extents
  // [nb][nh][nq][nk] (1: broadcast), with the call's key-major flag.
  for (const auto& [nm, m] : {std::pair<const char*, const MaskTensor*>{"attn_mask", &a.attn_mask},
                              {"attn_bias", &a.attn_bias},
                              {"block_mask", &a.block_mask},
                              {"tree_mask", &a.tree_mask}}) {
    if (!m->used()) continue;
    c.inputs.push_back(floats(nm, {m->nb, m->nh, m->nq, m->nk}, m->v));
    c.args.push_back(num((std::string(nm) + "_kt").c_str(), m->kt ? 1 : 0));
  }
  if (a.block_mask.used()) {
    c.args.push_back(num("block_q", static_cast<double>(a.block_q)));
    c.args.push_back(num("block_k", static_cast<double>(a.block_k)));
  }
  return c;
}

AttentionCase attention_case_of(const Call& c) {
  auto arg = [&](const char* n) -> const Arg& {
    const Arg* a = find(c.args, n);
    if (!a) throw std::invalid_argument(std::string("the call has no argument '") + n + "'");
    return *a;
  };
  auto i64 = [&](const char* n) { return static_cast<std::int64_t>(arg(n).number); };
  auto type = [&](const char* n) {
    const std::string w = arg(n).word;
    for (AttnType t : {AttnType::float32, AttnType::bfloat16, AttnType::float16, AttnType::fp8_e4m3,
                       AttnType::fp8_e5m2, AttnType::fp4_e2m1, AttnType::int8})
      if (w == name_of(t)) return t;
    throw std::invalid_argument(std::string("argument '") + n + "' is '" + w +
                                "'; expected float32, bfloat16, float16, fp8_e4m3, fp8_e5m2, "
                                "fp4_e2m1 or int8");
  };
  auto arr = [&](const char* n, bool required) -> const Array* {
    const Array* a = find(c.inputs, n);
    if (!a && required)
      throw std::invalid_argument(std::string("the call has no input '") + n + "'");
    return a;
  };
  AttentionCase a;
  a.qkv = type("qkv_dtype");
  a.out_type = type("out_dtype");
  a.batch = i64("batch");
  a.heads_q = i64("heads_q");
  a.heads_kv = i64("heads_kv");
  a.seqlen_q = i64("seqlen_q");
  a.seqlen_k = i64("seqlen_k");
  a.d = i64("head_dim");
  a.dv = i64("head_dim_v");
  a.scale = arg("scale").number;
  a.causal = arg("causal").number != 0;
  a.top_left = arg("alignment").word == "top_left";
  a.window_left = i64("window_left");
  a.window_right = i64("window_right");
  a.softcap = arg("softcap").number;
  a.q_descale = static_cast<float>(arg("q_descale").number);
  a.k_descale = static_cast<float>(arg("k_descale").number);
  a.v_descale = static_cast<float>(arg("v_descale").number);
  a.adaptive = arg("adaptive").number != 0;
  a.num_splits = i64("num_splits");
  a.layout = arg("layout").word == "bhsd" ? AttnLayout::bhsd : AttnLayout::bshd;
  a.row_pad = i64("row_pad");
  a.head_pad = i64("head_pad");
  a.q = arr("q", true)->f;
  a.k = arr("k", true)->f;
  a.v = arr("v", true)->f;
  if (const Array* x = arr("cu_seqlens_q", false)) a.cu_q = x->i32;
  if (const Array* x = arr("cu_seqlens_k", false)) a.cu_k = x->i32;
  if (const Array* x = arr("key_padding_mask", false)) a.key_padding_mask = x->u8;
  if (const Array* x = arr("alibi_slopes", false)) a.alibi_slopes = x->f;
  if (const Array* x = arr("sinks", false)) a.sinks = x->f;
  if (find(c.args, "page_size")) {
    a.page_size = i64("page_size");
    a.page_id_base = i64("page_id_base");
    a.page_seed = static_cast<std::uint64_t>(arg("page_seed").number);
  }
  if (find(c.args, "scale_block")) a.scale_block = i64("scale_block");
  if (find(c.args, "scale_type")) {  // 1 e4m3, 2 float32 (absent: E8M0)
    const std::int64_t st = i64("scale_type");
    if (st != 1 && st != 2)
      throw std::invalid_argument("argument 'scale_type' is " + std::to_string(st) +
                                  "; expected 1 (e4m3) or 2 (float32)");
    a.scale_type = st == 1 ? ScaleType::e4m3 : ScaleType::f32;
  }
  a.v_in_k = find(c.args, "v_in_k") && arg("v_in_k").number != 0;
  a.descale_bh = find(c.args, "descale_bh") && arg("descale_bh").number != 0;
  if (const Array* x = arr("kv_extra", false)) {
    a.kv_extra = x->i32;
    a.dense_call = find(c.args, "dense_call") && arg("dense_call").number != 0;
  }
  for (const auto& [nm, m] : {std::pair<const char*, MaskTensor*>{"attn_mask", &a.attn_mask},
                              {"attn_bias", &a.attn_bias},
                              {"block_mask", &a.block_mask},
                              {"tree_mask", &a.tree_mask}}) {
    const Array* x = arr(nm, false);
    if (!x) continue;
    if (x->shape.size() != 4)
      throw std::invalid_argument(std::string("input '") + nm +
                                  "' needs 4 extents [batch][heads][q][k]");
    m->nb = x->shape[0], m->nh = x->shape[1], m->nq = x->shape[2], m->nk = x->shape[3];
    m->v = x->f;
    const std::string kt = std::string(nm) + "_kt";
    m->kt = find(c.args, kt.c_str()) && arg(kt.c_str()).number != 0;
  }
  if (a.block_mask.used()) {
    a.block_q = i64("block_q");
    a.block_k = i64("block_k");
  }
  a.validate();
  return a;
}

}  // namespace sa::call_log

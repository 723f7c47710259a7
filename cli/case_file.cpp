#include "cli/case_file.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstring>
#include <fstream>
#include <span>
#include <sstream>
#include <stdexcept>

#include "core/dtype.hpp"
#include "core/output_file.hpp"
#include "reference/attention_backward_cr.hpp"
#include "reference/backward.hpp"
#include "reference/attention_cr.hpp"
#include "reference/entropy_cr.hpp"
#include "reference/log_softmax_cr.hpp"
#include "reference/softmax_cr.hpp"

namespace sa::cli {

using call_log::Array;
using call_log::Call;
using nlohmann::json;

std::uint32_t crc32(const void* data, std::size_t size) {
  static const auto table = [] {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1u) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  std::uint32_t c = 0xFFFFFFFFu;
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < size; ++i) c = table[(c ^ p[i]) & 0xFFu] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

namespace {

[[noreturn]] void bad(const std::string& what, const std::string& why) {
  throw std::invalid_argument(what + ": " + why);
}

void put16(std::string& s, std::uint32_t v) {
  s += static_cast<char>(v & 0xFF);
  s += static_cast<char>((v >> 8) & 0xFF);
}
void put32(std::string& s, std::uint32_t v) {
  put16(s, v & 0xFFFF);
  put16(s, v >> 16);
}
std::uint32_t get16(const std::string& s, std::size_t at) {
  return static_cast<unsigned char>(s[at]) | (static_cast<unsigned char>(s[at + 1]) << 8);
}
std::uint32_t get32(const std::string& s, std::size_t at) {
  return get16(s, at) | (get16(s, at + 2) << 16);
}

const char* descr_of(char kind) { return kind == 'u' ? "|u1" : kind == 'i' ? "<i4" : "<f4"; }
std::size_t elements(const Array& a) {
  std::size_t n = 1;
  for (auto d : a.shape) n *= static_cast<std::size_t>(d);
  return n;
}

}  // namespace

std::string npy_bytes(const Array& a) {
  std::string shape = "(";
  for (std::size_t i = 0; i < a.shape.size(); ++i)
    shape += (i ? ", " : "") + std::to_string(a.shape[i]);
  if (a.shape.size() == 1) shape += ",";
  shape += ")";
  std::string header = std::string("{'descr': '") + descr_of(a.kind) +
                       "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Magic (6) + version (2) + length (2) + header, a multiple of 64, ending in '\n'.
  const std::size_t total = (10 + header.size() + 1 + 63) / 64 * 64;
  header.append(total - 10 - header.size() - 1, ' ');
  header += '\n';
  std::string s = "\x93NUMPY";
  s += '\x01';
  s += '\x00';
  put16(s, static_cast<std::uint32_t>(header.size()));
  s += header;
  const std::size_t n = elements(a);
  if (a.kind == 'u') {
    s.append(reinterpret_cast<const char*>(a.u8.data()), n);
  } else if (a.kind == 'i') {
    for (std::size_t i = 0; i < n; ++i) put32(s, static_cast<std::uint32_t>(a.i32[i]));
  } else {
    for (std::size_t i = 0; i < n; ++i) {
      std::uint32_t u;
      std::memcpy(&u, &a.f[i], 4);
      put32(s, u);
    }
  }
  return s;
}

Array parse_npy(const std::string& b, const std::string& what) {
  if (b.size() < 10 || b.compare(0, 6, "\x93NUMPY") != 0)
    bad(what, "not a .npy array (no \\x93NUMPY magic)");
  if (b[6] != 1 && b[6] != 2 && b[6] != 3) bad(what, "unknown .npy version");
  std::size_t hlen = 0, start = 0;
  if (b[6] == 1) {
    hlen = get16(b, 8);
    start = 10;
  } else {
    if (b.size() < 12) bad(what, "truncated .npy header");
    hlen = get32(b, 8);
    start = 12;
  }
  if (start + hlen > b.size()) bad(what, "truncated .npy header");
  const std::string h = b.substr(start, hlen);
  Array a;
  if (h.find("'<f4'") != std::string::npos)
    a.kind = 'f';
  else if (h.find("'|u1'") != std::string::npos || h.find("'<u1'") != std::string::npos ||
           h.find("'|b1'") != std::string::npos)
    a.kind = 'u';
  else if (h.find("'<i4'") != std::string::npos)
    a.kind = 'i';
  else
    bad(what, "expected dtype float32 ('<f4'), uint8 or int32 ('<i4') in the .npy header");
  if (h.find("'fortran_order': False") == std::string::npos)
    bad(what, "expected a C-ordered array ('fortran_order': False)");
  const auto sp = h.find("'shape': (");
  if (sp == std::string::npos) bad(what, "no shape in the .npy header");
  const auto se = h.find(')', sp);
  std::string dims = h.substr(sp + 10, se - sp - 10);
  std::istringstream is(dims);
  std::string tok;
  while (std::getline(is, tok, ',')) {
    const auto f = tok.find_first_not_of(' ');
    if (f == std::string::npos) continue;
    try {
      const long long d = std::stoll(tok.substr(f));
      if (d < 0) throw std::out_of_range("negative");
      a.shape.push_back(d);
    } catch (const std::exception&) {
      bad(what, "shape entry '" + tok + "' is not a non-negative integer");
    }
  }
  const std::size_t n = elements(a), width = a.kind == 'u' ? 1 : 4;
  const std::size_t data = start + hlen;
  if (b.size() - data != n * width)
    bad(what, "holds " + std::to_string(b.size() - data) + " data bytes; its shape needs " +
                  std::to_string(n * width));
  if (a.kind == 'u') {
    a.u8.assign(b.begin() + static_cast<std::ptrdiff_t>(data), b.end());
  } else if (a.kind == 'i') {
    for (std::size_t i = 0; i < n; ++i)
      a.i32.push_back(static_cast<std::int32_t>(get32(b, data + 4 * i)));
  } else {
    a.f.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint32_t u = get32(b, data + 4 * i);
      std::memcpy(&a.f[i], &u, 4);
    }
  }
  return a;
}

std::string zip_stored(const std::vector<std::pair<std::string, std::string>>& members) {
  std::string out, central;
  for (const auto& [name, data] : members) {
    if (data.size() >= 0xFFFFFFFFull || out.size() >= 0xFFFFFFFFull)
      throw std::invalid_argument("case file member " + name +
                                  " is larger than 4 GiB (zip64 is not written)");
    const std::uint32_t crc = crc32(data.data(), data.size());
    const auto offset = static_cast<std::uint32_t>(out.size());
    const auto size = static_cast<std::uint32_t>(data.size());
    // Local file header: version 2.0, no flags, method 0 (stored), 1980-01-01 00:00.
    put32(out, 0x04034b50u);
    put16(out, 20);
    put16(out, 0);
    put16(out, 0);
    put16(out, 0);
    put16(out, 0x21);
    put32(out, crc);
    put32(out, size);
    put32(out, size);
    put16(out, static_cast<std::uint32_t>(name.size()));
    put16(out, 0);
    out += name;
    out += data;
    put32(central, 0x02014b50u);
    put16(central, 20);
    put16(central, 20);
    put16(central, 0);
    put16(central, 0);
    put16(central, 0);
    put16(central, 0x21);
    put32(central, crc);
    put32(central, size);
    put32(central, size);
    put16(central, static_cast<std::uint32_t>(name.size()));
    put16(central, 0);
    put16(central, 0);
    put16(central, 0);
    put16(central, 0);
    put32(central, 0);
    put32(central, offset);
    central += name;
  }
  const auto cd_offset = static_cast<std::uint32_t>(out.size());
  out += central;
  put32(out, 0x06054b50u);
  put16(out, 0);
  put16(out, 0);
  put16(out, static_cast<std::uint32_t>(members.size()));
  put16(out, static_cast<std::uint32_t>(members.size()));
  put32(out, static_cast<std::uint32_t>(central.size()));
  put32(out, cd_offset);
  put16(out, 0);
  return out;
}

std::map<std::string, std::string> unzip_stored(const std::string& b, const std::string& what) {
  // The end-of-central-directory record: the last 22 bytes plus any comment.
  std::size_t eocd = std::string::npos;
  for (std::size_t i = b.size() >= 22 ? b.size() - 22 : std::string::npos;
       i != std::string::npos && i + 22 <= b.size(); --i) {
    if (get32(b, i) == 0x06054b50u) {
      eocd = i;
      break;
    }
    if (i == 0 || b.size() - i > 22 + 0xFFFF) break;
  }
  if (eocd == std::string::npos) bad(what, "not a zip archive (.npz); expected a case file");
  const std::size_t count = get16(b, eocd + 10);
  std::size_t at = get32(b, eocd + 16);
  std::map<std::string, std::string> out;
  for (std::size_t e = 0; e < count; ++e) {
    if (at + 46 > b.size() || get32(b, at) != 0x02014b50u)
      bad(what, "damaged zip central directory");
    const std::uint32_t method = get16(b, at + 10), crc = get32(b, at + 16),
                        csize = get32(b, at + 20), usize = get32(b, at + 24);
    const std::size_t nlen = get16(b, at + 28), xlen = get16(b, at + 30), clen = get16(b, at + 32);
    const std::size_t local = get32(b, at + 42);
    if (at + 46 + nlen > b.size()) bad(what, "damaged zip central directory");
    const std::string name = b.substr(at + 46, nlen);
    if (method != 0 || csize != usize)
      bad(what, "member " + name +
                    " is compressed; expected stored members (numpy.savez, not "
                    "savez_compressed)");
    if (local + 30 > b.size() || get32(b, local) != 0x04034b50u)
      bad(what, "damaged zip local header of " + name);
    const std::size_t data = local + 30 + get16(b, local + 26) + get16(b, local + 28);
    if (data + usize > b.size()) bad(what, "member " + name + " is truncated");
    std::string bytes = b.substr(data, usize);
    if (crc32(bytes.data(), bytes.size()) != crc) bad(what, "member " + name + " fails its CRC-32");
    out[name] = std::move(bytes);
    at += 46 + nlen + xlen + clen;
  }
  return out;
}

std::string case_file_name(const Verdict& v) {
  std::string n =
      v.property + (v.op.empty() ? "" : "." + v.op) + (v.dtype.empty() ? "" : "." + v.dtype);
  for (char& c : n)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_')) c = '_';
  return n;
}

namespace {

const call_log::Arg& arg(const Call& c, const char* n) {
  const call_log::Arg* a = call_log::find(c.args, n);
  if (!a) throw std::invalid_argument(std::string("the call has no argument '") + n + "'");
  return *a;
}

// The element type of each output the call returned.
std::string output_dtype(const Call& c, const std::string& out) {
  if (c.op == "attention_v2" || c.op == "attention" || c.op == "attention_backward") {
    if (out == "lse" || out == "entropy" || out == "beta" || out == "dsinks") return "float32";
    if (c.op == "attention_backward") {
      const std::string q = arg(c, "qkv_dtype").word;
      return q.rfind("fp8", 0) == 0 || q == "fp4_e2m1" || q == "int8" ? arg(c, "out_dtype").word
                                                                      : q;
    }
    return arg(c, "out_dtype").word;
  }
  if (out == "out" || out == "dx") return arg(c, "dtype").word;
  return "float32";
}

DType dtype_named(const std::string& s) {
  const auto t = parse_dtype(s);
  if (!t) throw std::invalid_argument("dtype '" + s + "': expected float32, bfloat16 or float16");
  return *t;
}

std::vector<float> to_floats(const std::vector<double>& v) { return {v.begin(), v.end()}; }

// The correctly rounded reference values of the call's outputs (none for an
// op the reference here does not cover: adaptive_softmax, whose entropy
// definition the verdict does not carry).
std::vector<Array> expected_of(const Call& c) {
  std::vector<Array> e;
  auto like = [&](const std::string& name, std::vector<float> v) {
    for (const Array& g : c.got)
      if (g.name == name) e.push_back(call_log::floats(name, g.shape, std::move(v)));
  };
  if (c.op == "softmax" || c.op == "log_softmax" || c.op == "logsumexp" || c.op == "entropy") {
    const DType t = dtype_named(arg(c, "dtype").word);
    const auto rows = static_cast<std::int64_t>(arg(c, "rows").number);
    const auto n = static_cast<std::int64_t>(arg(c, "n").number);
    const auto stride = static_cast<std::int64_t>(arg(c, "stride").number);
    const double theta = arg(c, "temperature").number;
    const Array* x = call_log::find(c.inputs, "x");
    if (!x) return e;
    std::vector<float> out;
    for (std::int64_t r = 0; r < rows; ++r) {
      std::vector<double> l(x->f.begin() + r * stride, x->f.begin() + r * stride + n);
      if (c.op == "softmax") {
        for (double y : ref::softmax_rounded(t, l, theta)) out.push_back(static_cast<float>(y));
      } else if (c.op == "log_softmax") {
        for (double y : ref::log_softmax_rounded(t, l, theta)) out.push_back(static_cast<float>(y));
      } else if (c.op == "logsumexp") {
        out.push_back(static_cast<float>(ref::log_sum_exp_rounded(DType::float32, l, theta)));
      } else {
        out.push_back(static_cast<float>(ref::shannon_entropy_rounded(DType::float32, l, theta)));
      }
    }
    like(c.op == "logsumexp" ? "lse" : c.op == "entropy" ? "entropy" : "out", std::move(out));
  } else if (c.op == "softmax_backward" || c.op == "log_softmax_backward") {
    const DType t = dtype_named(arg(c, "dtype").word);
    const auto rows = static_cast<std::int64_t>(arg(c, "rows").number);
    const auto n = static_cast<std::int64_t>(arg(c, "n").number);
    const auto stride = static_cast<std::int64_t>(arg(c, "stride").number);
    const double theta = arg(c, "temperature").number;
    const Array* y = call_log::find(c.inputs, "y");
    const Array* dy = call_log::find(c.inputs, "dy");
    if (!y || !dy) return e;
    std::vector<float> out;
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::span<const float> yr(y->f.data() + r * stride, static_cast<std::size_t>(n));
      const std::span<const float> dr(dy->f.data() + r * stride, static_cast<std::size_t>(n));
      const ref::RowGradient g = c.op == "softmax_backward"
                                     ? ref::softmax_backward(t, yr, dr, theta)
                                     : ref::log_softmax_backward(t, yr, dr, theta);
      for (double x : g.rounded) out.push_back(static_cast<float>(x));
    }
    like("dx", std::move(out));
  } else if (c.op == "attention_v2" || c.op == "attention") {
    const AttentionCase a = call_log::attention_case_of(c);
    const auto o = ref::attention_rounded(dtype_named(output_dtype(c, "out")), a);
    like("out", to_floats(o.out));
    const auto s =
        output_dtype(c, "out") == "float32" ? o : ref::attention_rounded(DType::float32, a);
    like("lse", to_floats(s.lse));
    like("entropy", to_floats(s.entropy));
    like("beta", to_floats(s.beta));
  } else if (c.op == "attention_backward") {
    const AttentionCase a = call_log::attention_case_of(c);
    const Array* dout = call_log::find(c.inputs, "dout");
    if (!dout) return e;
    const std::string gt = output_dtype(c, "dq");
    const auto g = ref::attention_backward_rounded(dtype_named(gt), a, dout->f);
    like("dq", to_floats(g.dq));
    like("dk", to_floats(g.dk));
    like("dv", to_floats(g.dv));
    if (!a.sinks.empty())
      like("dsinks",
           to_floats(gt == "float32"
                         ? g.dsinks
                         : ref::attention_backward_rounded(DType::float32, a, dout->f).dsinks));
  }
  return e;
}

json number_json(double x) {
  if (std::isnan(x)) return "NaN";
  if (std::isinf(x)) return x > 0 ? "Infinity" : "-Infinity";
  return x;
}
double json_number(const json& j) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) {
    const std::string s = j.get<std::string>();
    if (s == "NaN") return NAN;
    if (s == "Infinity") return INFINITY;
    if (s == "-Infinity") return -INFINITY;
  }
  throw std::invalid_argument("expected a number, got " + j.dump());
}

}  // namespace

std::string write_case_file(const std::string& dir, const Verdict& v,
                            const std::vector<Call>& calls) {
  const std::string base = dir + "/" + case_file_name(v);
  std::vector<std::pair<std::string, std::string>> members;
  json jcalls = json::array();
  for (std::size_t i = 0; i < calls.size(); ++i) {
    const Call& c = calls[i];
    const std::string prefix = i == 0 ? "" : "call" + std::to_string(i) + "_";
    json jc;
    jc["op"] = c.op;
    json args = json::object();
    for (const auto& a : c.args)
      args[a.name] = a.word.empty() ? number_json(a.number) : json(a.word);
    jc["args"] = args;
    auto add = [&](const char* group, const std::string& stem, const Array& a) {
      const std::string key = prefix + stem;
      members.emplace_back(key + ".npy", npy_bytes(a));
      jc[group][a.name] = key;
    };
    for (const Array& a : c.inputs) add("inputs", a.name, a);
    json dtypes = json::object();
    for (const Array& a : c.got) {
      add("got", "got_" + a.name, a);
      dtypes[a.name] = output_dtype(c, a.name);
    }
    jc["output_dtypes"] = dtypes;
    std::vector<Array> ex;
    try {
      ex = expected_of(c);
    } catch (const std::exception& err) {
      jc["expected_error"] = err.what();
    }
    for (const Array& a : ex) add("expected", "expected_" + a.name, a);
    if (ex.empty() && !jc.contains("expected_error"))
      jc["expected_error"] = "no reference for " + c.op + " here";
    jcalls.push_back(jc);
  }
  json meta;
  meta["format"] = "softmax-audit case 1";
  meta["verdict"] = {{"property", v.property},
                     {"kernel", v.kernel},
                     {"op", v.op},
                     {"dtype", v.dtype},
                     {"claim", v.claim},
                     {"measured", number_json(v.measured)},
                     {"bound", number_json(v.bound)},
                     {"rule", v.rule.id},
                     {"counterexample", v.counterexample},
                     {"note", v.note}};
  meta["tolerance_ulps"] = kDefaultToleranceUlps;
  meta["calls"] = jcalls;
  meta["replay"] = "softmax-audit replay " + case_file_name(v) +
                   ".npz --plugin LIB | --python MOD:ATTR | --builtin NAME";
  const std::string text = meta.dump(2) + "\n";
  members.emplace_back("case.json", text);
  write_file_atomically(base + ".npz", zip_stored(members));
  write_file_atomically(base + ".json", text);
  return base + ".npz";
}

CaseFile read_case_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) bad("case file " + path, "cannot be read; expected a .npz written by `check`");
  std::ostringstream ss;
  ss << f.rdbuf();
  const std::string what = "case file " + path;
  const auto members = unzip_stored(ss.str(), what);
  const auto mj = members.find("case.json");
  if (mj == members.end()) bad(what, "has no case.json member; expected a case file of `check`");
  CaseFile cf;
  try {
    cf.meta = json::parse(mj->second);
  } catch (const std::exception& e) {
    bad(what, std::string("case.json is not JSON (") + e.what() + ")");
  }
  if (!cf.meta.is_object() || cf.meta.value("format", "") != "softmax-audit case 1")
    bad(what, "case.json lacks \"format\": \"softmax-audit case 1\"");
  if (!cf.meta.contains("calls") || !cf.meta["calls"].is_array() || cf.meta["calls"].empty())
    bad(what, "case.json has no calls");
  auto array = [&](const json& key) {
    if (!key.is_string()) bad(what, "an array name in case.json is not a string");
    const auto it = members.find(key.get<std::string>() + ".npy");
    if (it == members.end()) bad(what, "has no member " + key.get<std::string>() + ".npy");
    return parse_npy(it->second, what + " member " + key.get<std::string>() + ".npy");
  };
  for (const json& jc : cf.meta["calls"]) {
    Call c;
    if (!jc.is_object() || !jc.contains("op") || !jc["op"].is_string() || !jc.contains("args") ||
        !jc["args"].is_object())
      bad(what, "a call in case.json lacks its op or args");
    c.op = jc["op"];
    for (const auto& [k, val] : jc["args"].items()) {
      call_log::Arg a;
      a.name = k;
      try {
        if (val.is_string() && val != "NaN" && val != "Infinity" && val != "-Infinity")
          a.word = val.get<std::string>();
        else
          a.number = json_number(val);
      } catch (const std::exception& e) {
        bad(what, "argument " + k + ": " + e.what());
      }
      c.args.push_back(a);
    }
    std::map<std::string, Array> ex;
    for (const char* group : {"inputs", "got", "expected"}) {
      if (!jc.contains(group)) continue;
      if (!jc[group].is_object()) bad(what, std::string("\"") + group + "\" is not an object");
      for (const auto& [name, key] : jc[group].items()) {
        Array a = array(key);
        a.name = name;
        if (std::string(group) == "inputs")
          c.inputs.push_back(std::move(a));
        else if (std::string(group) == "got")
          c.got.push_back(std::move(a));
        else
          ex[name] = std::move(a);
      }
    }
    cf.calls.push_back(std::move(c));
    cf.expected.push_back(std::move(ex));
  }
  return cf;
}

double ulp_error(const std::string& dtype, double got, double expected, double scale) {
  if (std::isnan(got) && std::isnan(expected)) return 0;
  if (got == expected) return 0;
  if (!std::isfinite(got) || !std::isfinite(expected)) return INFINITY;
  // Spacing of the type at |expected| (its subnormal spacing below the normal range).
  const int p = dtype == "bfloat16" ? 8 : dtype == "float16" ? 11 : dtype == "float64" ? 53 : 24;
  const int emin = dtype == "bfloat16"  ? -126
                   : dtype == "float16" ? -14
                   : dtype == "float64" ? -1022
                                        : -126;
  int e = 0;
  std::frexp(std::max(std::abs(expected), scale), &e);  // = m 2^e, 0.5 <= m < 1
  const double ulp = std::ldexp(1.0, std::max(e - 1, emin) - (p - 1));
  return std::abs(got - expected) / ulp;
}

}  // namespace sa::cli

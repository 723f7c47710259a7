#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "variants/variant.hpp"

namespace sa::variants {
namespace detail {
extern int builtins_anchor;  // defined in builtins.cpp: keeps its registrations linked
}

const char* name_of(Dispersion d) {
  switch (d) {
    case Dispersion::to_zero:
      return "to_zero";
    case Dispersion::bounded:
      return "bounded";
    case Dispersion::to_one:
      return "to_one";
  }
  return "?";
}

const char* name_of(StreamKind k) {
  switch (k) {
    case StreamKind::not_supplied:
      return "not supplied";
    case StreamKind::bitwise:
      return "bitwise";
    case StreamKind::bounded:
      return "bounded";
    case StreamKind::no:
      return "no";
  }
  return "?";
}

const char* name_of(In2Kind k) {
  switch (k) {
    case In2Kind::none:
      return "none";
    case In2Kind::logits:
      return "logits";
    case In2Kind::per_key:
      return "per_key";
  }
  return "?";
}

bool Registry::add(Variant v) {
  if (v.name.empty()) throw std::invalid_argument("variant registry: a variant has an empty name");
  if (v.in2_kind != In2Kind::none) {
    if (!v.kernel32_2 || !v.eval64_2)
      throw std::invalid_argument("variant registry: two-row variant '" + v.name +
                                  "' needs kernel32_2 and eval64_2");
  } else if (!v.kernel32)
    throw std::invalid_argument("variant registry: variant '" + v.name + "' has no float32 kernel");
  if (v.in2_kind == In2Kind::none && !v.eval64)
    throw std::invalid_argument("variant registry: variant '" + v.name +
                                "' has no float64 evaluation");
  if (find(v.name))
    throw std::invalid_argument("variant registry: a variant named '" + v.name +
                                "' already exists");
  variants_.push_back(std::move(v));
  return true;
}

const Variant* Registry::find(const std::string& name) const {
  for (const auto& v : variants_)
    if (v.name == name) return &v;
  return nullptr;
}

Registry& registry() {
  static Registry r;
  // A real reference to builtins.cpp, so a static link keeps its registrations.
  static int* volatile keep = &detail::builtins_anchor;
  (void)keep;
  return r;
}

namespace {
// The generic bound for a plugin that states none: docs/theory.md T7 for shifted
// softmax with faithful exp (terms doubled), 2(n + 2 + 2 spread), plus the
// input-scaling term 2 max|l| (condition number 2||l||_inf, T7 last bullet).
double generic_bound(std::span<const double> l) {
  double lo = INFINITY, hi = -INFINITY, amax = 0;
  for (double x : l)
    if (std::isfinite(x)) {
      lo = std::min(lo, x);
      hi = std::max(hi, x);
      amax = std::max(amax, std::abs(x));
    }
  const double spread = hi >= lo ? hi - lo : 0.0;
  return 2.0 * (static_cast<double>(l.size()) + 2.0 + 2.0 * spread) + 2.0 * amax;
}

// The generic streamed-softmax bound for a plugin that states none
// (docs/variants.md, "Streamability"): online softmax with faithful exp,
// 4n + 3 chunks + 2 spread - 2, plus the input-scaling term 2 max|l|.
double generic_stream_bound(std::span<const double> l, std::size_t chunks) {
  double lo = INFINITY, hi = -INFINITY, amax = 0;
  for (double x : l)
    if (std::isfinite(x)) {
      lo = std::min(lo, x);
      hi = std::max(hi, x);
      amax = std::max(amax, std::abs(x));
    }
  const double spread = hi >= lo ? hi - lo : 0.0;
  return 4.0 * static_cast<double>(l.size()) + 3.0 * static_cast<double>(chunks) + 2.0 * spread -
         2.0 + 2.0 * amax;
}

// The ABI 2 streaming fields of a plugin that states version >= 2; for a
// two-row variant (version >= 4) the ABI 4 push2/finish2/bound2 in place of
// push/finish/bound.
Stream stream_from_c_abi(const sa_variant& c, const std::string& origin, bool two_row) {
  Stream s;
  const std::string who = origin + ": variant '" + c.name + "'";
  switch (c.stream_kind) {
    case SA_STREAM_NOT_SUPPLIED:
      return s;
    case SA_STREAM_NO:
      s.kind = StreamKind::no;
      s.note = c.stream_note ? c.stream_note : "the plugin states it has no merge state";
      return s;
    case SA_STREAM_BITWISE:
      s.kind = StreamKind::bitwise;
      break;
    case SA_STREAM_BOUNDED:
      s.kind = StreamKind::bounded;
      break;
    default:
      throw std::runtime_error(who + ": stream_kind " + std::to_string(c.stream_kind) +
                               " is none of SA_STREAM_* (include/softmax_audit/variant.h)");
  }
  if (two_row && c.abi_version < 4)
    throw std::runtime_error(who +
                             ": streaming is not supported for two-row variants at ABI version 3 "
                             "(state_push carries no second row; version 4 adds state_push2)");
  if (two_row &&
      (!c.state_init || !c.state_push2 || !c.state_merge || !c.state_finish2 || c.state_bytes <= 0))
    throw std::runtime_error(who +
                             ": stream_kind claims streaming but state_bytes, state_init, "
                             "state_push2, state_merge or state_finish2 is missing");
  if (!two_row &&
      (!c.state_init || !c.state_push || !c.state_merge || !c.state_finish || c.state_bytes <= 0))
    throw std::runtime_error(who +
                             ": stream_kind claims streaming but state_bytes, state_init, "
                             "state_push, state_merge or state_finish is missing");
  const sa_variant* cp = &c;
  const std::string name = c.name;
  s.state_bytes = static_cast<std::size_t>(c.state_bytes);
  s.init = [cp](void* st) { cp->state_init(st, cp->ctx); };
  s.merge = [cp, name](void* a, const void* b) {
    if (cp->state_merge(a, b, cp->ctx) != 0)
      throw std::runtime_error("variant '" + name + "': state_merge failed");
  };
  if (two_row) {
    s.push2 = [cp, name](void* st, std::span<const float> ch, std::span<const float> ch2,
                         std::size_t off, std::size_t n) {
      if (cp->state_push2(st, ch.data(), ch2.data(), static_cast<int64_t>(ch.size()),
                          static_cast<int64_t>(off), static_cast<int64_t>(n), cp->ctx) != 0)
        throw std::runtime_error("variant '" + name + "': state_push2 rejected a chunk");
    };
    s.finish2 = [cp, name](const void* st, std::span<const float> l, std::span<const float> l2,
                           std::span<float> out) {
      if (cp->state_finish2(st, l.data(), l2.data(), static_cast<int64_t>(l.size()), out.data(),
                            cp->ctx) != 0)
        throw std::runtime_error("variant '" + name + "': state_finish2 failed");
    };
    if (c.stream_error_bound2) {
      s.bound2 = [cp](std::span<const double> l, std::span<const double> l2, std::size_t k) {
        return cp->stream_error_bound2(l.data(), l2.data(), static_cast<int64_t>(l.size()),
                                       static_cast<int64_t>(k), cp->ctx);
      };
      s.bound_rule = "plugin.stream_error_bound2";
    } else {
      s.bound2 = [](std::span<const double> l, std::span<const double> l2, std::size_t k) {
        return generic_stream_bound(l, k) + generic_stream_bound(l2, k);
      };
      s.bound_rule =
          "stream.generic2: the generic online softmax bound of the first row plus that of the "
          "second (docs/variants.md, Streamability)";
    }
    return s;
  }
  s.push = [cp, name](void* st, std::span<const float> ch, std::size_t off, std::size_t n) {
    if (cp->state_push(st, ch.data(), static_cast<int64_t>(ch.size()), static_cast<int64_t>(off),
                       static_cast<int64_t>(n), cp->ctx) != 0)
      throw std::runtime_error("variant '" + name + "': state_push rejected a chunk");
  };
  s.finish = [cp, name](const void* st, std::span<const float> l, std::span<float> p) {
    if (cp->state_finish(st, l.data(), static_cast<int64_t>(l.size()), p.data(), cp->ctx) != 0)
      throw std::runtime_error("variant '" + name + "': state_finish failed");
  };
  if (c.stream_error_bound) {
    s.bound = [cp](std::span<const double> l, std::size_t chunks) {
      return cp->stream_error_bound(l.data(), static_cast<int64_t>(l.size()),
                                    static_cast<int64_t>(chunks), cp->ctx);
    };
    s.bound_rule = "plugin.stream_error_bound";
  } else {
    s.bound = generic_stream_bound;
    s.bound_rule =
        "stream.generic: online softmax, 4n + 3 chunks + 2 spread - 2 + 2 max|l| "
        "(docs/variants.md, Streamability)";
  }
  return s;
}

// The ABI 3 two-row functions of a plugin that states a second row.
Variant two_row_from_c_abi(const sa_variant& c, Variant v, const std::string& origin) {
  const std::string who = origin + ": variant '" + c.name + "'";
  switch (c.in2_kind) {
    case SA_IN2_LOGITS:
      v.in2_kind = In2Kind::logits;
      break;
    case SA_IN2_PER_KEY:
      v.in2_kind = In2Kind::per_key;
      break;
    default:
      throw std::runtime_error(who + ": in2_kind " + std::to_string(c.in2_kind) +
                               " is neither SA_IN2_LOGITS nor SA_IN2_PER_KEY "
                               "(include/softmax_audit/variant.h)");
  }
  if (c.out_kind != SA_OUT_WEIGHTS && c.out_kind != SA_OUT_SCALAR)
    throw std::runtime_error(who + ": out_kind " + std::to_string(c.out_kind) +
                             " is neither SA_OUT_WEIGHTS nor SA_OUT_SCALAR");
  v.in2 = c.in2;
  v.scalar_output = c.out_kind == SA_OUT_SCALAR;
  const sa_variant* cp = &c;
  const std::string name = v.name;
  v.kernel32_2 = [cp, name](std::span<const float> l, std::span<const float> l2,
                            std::span<float> out) {
    if (cp->forward2_f32(l.data(), l2.data(), static_cast<int64_t>(l.size()), out.data(),
                         cp->ctx) != 0)
      throw std::runtime_error("variant '" + name +
                               "': forward2_f32 rejected a row of n = " + std::to_string(l.size()));
  };
  if (c.forward2_f64) {
    v.eval64_2 = [cp, name](std::span<const double> l, std::span<const double> l2,
                            std::span<double> out) {
      if (cp->forward2_f64(l.data(), l2.data(), static_cast<int64_t>(l.size()), out.data(),
                           cp->ctx) != 0)
        throw std::runtime_error("variant '" + name + "': forward2_f64 rejected a row of n = " +
                                 std::to_string(l.size()));
    };
    v.reference_2 = [f = v.eval64_2, scalar = v.scalar_output](std::span<const double> l,
                                                               std::span<const double> l2) {
      std::vector<double> p(scalar ? 1 : l.size());
      f(l, l2, p);
      return std::vector<ref::Mp>(p.begin(), p.end());
    };
    v.reference_name = "float64 (plugin forward2_f64)";
    v.reference_unit_roundoff = 0x1p-53;
  } else {
    v.eval64_2 = [k = v.kernel32_2](std::span<const double> l, std::span<const double> l2,
                                    std::span<double> out) {
      std::vector<float> lf(l.begin(), l.end()), l2f(l2.begin(), l2.end()), of(out.size());
      k(lf, l2f, of);
      std::copy(of.begin(), of.end(), out.begin());
    };
    v.reference_name = "none (float32 kernel)";
    v.reference_unit_roundoff = 0x1p-24;
  }
  if (c.f32_error_bound2) {
    v.f32_bound_2 = [cp](std::span<const double> l, std::span<const double> l2) {
      return cp->f32_error_bound2(l.data(), l2.data(), static_cast<int64_t>(l.size()), cp->ctx);
    };
    v.f32_bound_rule = "plugin.f32_error_bound2";
  } else {
    v.f32_bound_2 = [](std::span<const double> l, std::span<const double> l2) {
      return generic_bound(l) + generic_bound(l2);
    };
    v.f32_bound_rule = "T7.generic of the first row plus that of the second";
  }
  if (c.predict_dispersion) {
    v.predict = [cp](double g) -> std::optional<Prediction> {
      const sa_dispersion d = cp->predict_dispersion(g, cp->ctx);
      const std::string src = cp->prediction_source ? cp->prediction_source : "plugin";
      switch (d) {
        case SA_DISPERSION_TO_ZERO:
          return Prediction{Dispersion::to_zero, src};
        case SA_DISPERSION_BOUNDED:
          return Prediction{Dispersion::bounded, src};
        case SA_DISPERSION_TO_ONE:
          return Prediction{Dispersion::to_one, src};
        default:
          return std::nullopt;
      }
    };
  }
  return v;
}
}  // namespace

Variant from_c_abi(const sa_variant& c, const std::string& origin) {
  if (c.abi_version < SA_VARIANT_ABI_VERSION_MIN || c.abi_version > SA_VARIANT_ABI_VERSION)
    throw std::runtime_error(origin + ": variant ABI version " + std::to_string(c.abi_version) +
                             ", expected " + std::to_string(SA_VARIANT_ABI_VERSION_MIN) + " to " +
                             std::to_string(SA_VARIANT_ABI_VERSION));
  // Version 3 may leave forward_f32 NULL when it supplies forward2_f32.
  const bool two_row = c.abi_version >= 3 && c.in2 != nullptr;
  if (!c.name || (!two_row && !c.forward_f32))
    throw std::runtime_error(origin + ": a variant lacks a name or forward_f32");
  if (two_row && !c.forward2_f32)
    throw std::runtime_error(origin + ": variant '" + c.name +
                             "' states a second row (in2) but no forward2_f32");
  Variant v;
  v.name = c.name;
  v.formula = c.formula ? c.formula : "";
  v.wrong_formulation = c.wrong_formulation != 0;
  v.wrong_of = c.wrong_of ? c.wrong_of : "";
  v.origin = origin;
  v.citation = "plugin";
  // Version 1 structs end at ctx: nothing past it is read.
  if (c.abi_version >= 2) v.stream = stream_from_c_abi(c, origin, two_row);
  const sa_variant* cp = &c;
  if (two_row) return two_row_from_c_abi(c, std::move(v), origin);
  v.kernel32 = [cp, name = v.name](std::span<const float> l, std::span<float> p) {
    if (cp->forward_f32(l.data(), static_cast<int64_t>(l.size()), p.data(), cp->ctx) != 0)
      throw std::runtime_error("variant '" + name +
                               "': forward_f32 rejected a row of n = " + std::to_string(l.size()));
  };
  if (c.forward_f64) {
    v.eval64 = [cp, name = v.name](std::span<const double> l, std::span<double> p) {
      if (cp->forward_f64(l.data(), static_cast<int64_t>(l.size()), p.data(), cp->ctx) != 0)
        throw std::runtime_error("variant '" + name + "': forward_f64 rejected a row of n = " +
                                 std::to_string(l.size()));
    };
    v.reference = [f = v.eval64](std::span<const double> l) {
      std::vector<double> p(l.size());
      f(l, p);
      return std::vector<ref::Mp>(p.begin(), p.end());
    };
    v.reference_name = "float64 (plugin forward_f64)";
    v.reference_unit_roundoff = 0x1p-53;
  } else {
    // No reference: the float32 kernel is all there is (evaluated, widened).
    v.eval64 = [k = v.kernel32](std::span<const double> l, std::span<double> p) {
      std::vector<float> lf(l.begin(), l.end()), pf(l.size());
      k(lf, pf);
      std::copy(pf.begin(), pf.end(), p.begin());
    };
    v.reference_name = "none (float32 kernel)";
    v.reference_unit_roundoff = 0x1p-24;
  }
  if (c.f32_error_bound) {
    v.f32_bound = [cp](std::span<const double> l) {
      return cp->f32_error_bound(l.data(), static_cast<int64_t>(l.size()), cp->ctx);
    };
    v.f32_bound_rule = "plugin.f32_error_bound";
  } else {
    v.f32_bound = generic_bound;
    v.f32_bound_rule =
        "T7.generic: 2(n+2+2*spread)+2*max|l| (Blanchard-Higham-Higham 2021, faithful exp)";
  }
  if (c.predict_dispersion) {
    v.predict = [cp](double g) -> std::optional<Prediction> {
      const sa_dispersion d = cp->predict_dispersion(g, cp->ctx);
      const std::string src = cp->prediction_source ? cp->prediction_source : "plugin";
      switch (d) {
        case SA_DISPERSION_TO_ZERO:
          return Prediction{Dispersion::to_zero, src};
        case SA_DISPERSION_BOUNDED:
          return Prediction{Dispersion::bounded, src};
        case SA_DISPERSION_TO_ONE:
          return Prediction{Dispersion::to_one, src};
        default:
          return std::nullopt;
      }
    };
  }
  return v;
}

std::vector<Variant> load_plugin(const std::string& path) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    throw std::runtime_error("variant plugin '" + path + "': cannot load (" + (e ? e : "?") + ")");
  }
  auto entry = reinterpret_cast<sa_variant_entry_at_fn>(dlsym(h, "sa_variant_entry_at"));
  if (!entry)
    throw std::runtime_error(
        "variant plugin '" + path +
        "': no exported function sa_variant_entry_at (see include/softmax_audit/variant.h)");
  std::vector<Variant> out;
  for (int i = 0; i < 1024; ++i) {
    const sa_variant* c = entry(i);
    if (!c) break;
    out.push_back(from_c_abi(*c, "plugin:" + path));
  }
  if (out.empty()) throw std::runtime_error("variant plugin '" + path + "': exports no variants");
  return out;
}

}  // namespace sa::variants

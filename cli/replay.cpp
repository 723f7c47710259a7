// `softmax-audit replay CASE`: runs the one recorded kernel call of a case
// file (cli/case_file.hpp) again, through the gate's isolation (the kernel
// runs in a kernel host, gate/host.hpp; this process only judges), and
// prints expected vs got vs the recorded got, in ulps. Exit 0: every output
// is now within the case's tolerance; 1: it still fails; 2: bad input (the
// case file, the kernel choice) or the kernel cannot be loaded.
#include <sys/prctl.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "cli/case_file.hpp"
#include "cli/commands.hpp"
#include "cli/python_kernel.hpp"
#include "gate/guard.hpp"
#include "gate/host.hpp"
#include "gate/kernel_source.hpp"
#include "kernels/builtin.hpp"

namespace sa::cli {

namespace {

struct ReplayOptions {
  std::string case_path, plugin, builtin, python;
  int kernel_index = -1;
  std::optional<double> tolerance;
  double timeout = 60;
};

struct Usage : std::runtime_error {
  using std::runtime_error::runtime_error;
};

gate::KernelSource pick(const ReplayOptions& o) {
  if (!o.python.empty())
    if (const std::string why = python_kernel_name_error(o.python); !why.empty())
      throw Usage("--python " + o.python + ": " + why);
  if (int(!o.plugin.empty()) + int(!o.builtin.empty()) + int(!o.python.empty()) != 1)
    throw Usage(
        "give exactly one of --plugin PATH (a kernel library built against "
        "softmax_audit/kernel.h), --builtin NAME or --python package.module:kernel");
  try {
    if (!o.python.empty()) {
      if (!python_kernel_hook()) exec_python_check();  // does not return
      return python_kernel_hook()(o.python, o.timeout);
    }
    if (!o.plugin.empty()) {
      if (access(o.plugin.c_str(), R_OK) != 0)
        throw Usage("plugin " + o.plugin +
                    ": no such readable file; expected a shared library (.so) exporting "
                    "sa_kernel_entry (see include/softmax_audit/kernel.h)");
      return gate::KernelSource::probe_plugin(o.plugin, o.kernel_index, o.timeout);
    }
  } catch (const std::invalid_argument& e) {
    throw Usage(e.what());
  }
  std::string names;
  for (auto& k : builtin_kernels()) {
    if (k.name() == o.builtin) return gate::KernelSource(k);
    names += (names.empty() ? "" : ", ") + k.name();
  }
  throw Usage("--builtin " + o.builtin + ": no built-in kernel of that name; expected one of: " +
              (names.empty() ? std::string("(none in this build)") : names));
}

double num_arg(const call_log::Call& c, const char* n) {
  const call_log::Arg* a = call_log::find(c.args, n);
  if (!a) throw Usage(std::string("the recorded ") + c.op + " call has no argument '" + n + "'");
  return a->number;
}
std::string word_arg(const call_log::Call& c, const char* n) {
  const call_log::Arg* a = call_log::find(c.args, n);
  if (!a) throw Usage(std::string("the recorded ") + c.op + " call has no argument '" + n + "'");
  return a->word;
}

// A recorded row call as the batch the suite passed; checked before any work.
RowBatch batch_of(const call_log::Call& c, DType& t, double& theta) {
  const bool backward = c.op == "softmax_backward" || c.op == "log_softmax_backward";
  const char* in = backward ? "y" : "x";
  const auto pt = parse_dtype(word_arg(c, "dtype"));
  if (!pt || *pt == DType::float64)
    throw Usage("the recorded call's dtype '" + word_arg(c, "dtype") +
                "': expected float32, bfloat16 or float16");
  t = *pt;
  theta = num_arg(c, "temperature");
  RowBatch b;
  b.rows = static_cast<std::int64_t>(num_arg(c, "rows"));
  b.n = static_cast<std::int64_t>(num_arg(c, "n"));
  b.stride = static_cast<std::int64_t>(num_arg(c, "stride"));
  b.out_stride = static_cast<std::int64_t>(num_arg(c, "out_stride"));
  b.in_place = num_arg(c, "in_place") != 0;
  const call_log::Array* x = call_log::find(c.inputs, in);
  if (!x || x->kind != 'f')
    throw Usage("the recorded row call has no float32 input '" + std::string(in) + "'");
  if (b.rows < 1 || b.n < 1 || b.stride < b.n ||
      static_cast<std::int64_t>(x->f.size()) != b.rows * b.stride)
    throw Usage("the recorded row call's " + std::string(in) + " has " +
                std::to_string(x->f.size()) +
                " values; expected rows x stride with stride >= n >= 1");
  if (backward) {
    const call_log::Array* dy = call_log::find(c.inputs, "dy");
    if (!dy || dy->kind != 'f' || dy->f.size() != x->f.size())
      throw Usage("the recorded " + c.op + " call has no float32 input 'dy' the size of y");
  }
  b.data = x->f;
  return b;
}

std::vector<float> compact(const std::vector<float>& v, const RowBatch& b) {
  std::vector<float> r;
  for (std::int64_t i = 0; i < b.rows; ++i)
    for (std::int64_t j = 0; j < b.n; ++j)
      r.push_back(v[static_cast<std::size_t>(i * b.stride + j)]);
  return r;
}

// Validates a call before any work (Usage naming what is wrong).
void validate_call(const call_log::Call& c) {
  if (c.op == "softmax" || c.op == "log_softmax" || c.op == "logsumexp" || c.op == "entropy" ||
      c.op == "adaptive_softmax" || c.op == "softmax_backward" || c.op == "log_softmax_backward") {
    DType t;
    double th;
    (void)batch_of(c, t, th);
  } else if (c.op == "attention_v2" || c.op == "attention" || c.op == "attention_backward") {
    try {
      (void)call_log::attention_case_of(c);
    } catch (const std::invalid_argument& e) {
      throw Usage(std::string("the recorded ") + c.op + " call: " + e.what());
    }
    if (c.op == "attention_backward")
      for (const char* n : {"out", "lse", "dout"})
        if (!call_log::find(c.inputs, n))
          throw Usage(std::string("the recorded attention_backward call has no input '") + n + "'");
  } else {
    throw Usage("the recorded call's op '" + c.op +
                "': expected softmax, log_softmax, logsumexp, entropy, adaptive_softmax, "
                "softmax_backward, log_softmax_backward, attention_v2, attention (interface v1) or "
                "attention_backward");
  }
}

// Runs one recorded call on `k`; the outputs by name.
std::map<std::string, std::vector<float>> run_call(const Kernel& k, const call_log::Call& c) {
  std::map<std::string, std::vector<float>> r;
  if (c.op == "attention_v2" || c.op == "attention") {
    const AttentionCase a = call_log::attention_case_of(c);
    const AttentionResult o = c.op == "attention" ? k.attention(a) : k.attention_v2(a);
    r["out"] = o.out;
    if (!o.lse.empty()) r["lse"] = o.lse;
    if (!o.entropy.empty()) r["entropy"] = o.entropy;
    if (!o.beta.empty()) r["beta"] = o.beta;
    return r;
  }
  if (c.op == "attention_backward") {
    const AttentionCase a = call_log::attention_case_of(c);
    const auto g = k.attention_backward(
        a, call_log::find(c.inputs, "out")->f, call_log::find(c.inputs, "lse")->f,
        call_log::find(c.inputs, "dout")->f, num_arg(c, "deterministic") != 0);
    r["dq"] = g.dq;
    r["dk"] = g.dk;
    r["dv"] = g.dv;
    if (!g.dsinks.empty()) r["dsinks"] = g.dsinks;
    return r;
  }
  DType t;
  double th;
  const RowBatch b = batch_of(c, t, th);
  if (c.op == "softmax_backward" || c.op == "log_softmax_backward") {
    const std::vector<float>& dy = call_log::find(c.inputs, "dy")->f;
    r["dx"] = compact(c.op == "softmax_backward" ? k.softmax_backward(t, b, dy, th)
                                                 : k.log_softmax_backward(t, b, dy, th),
                      b);
  }
  if (c.op == "softmax") r["out"] = compact(k.softmax(t, b, th), b);
  if (c.op == "log_softmax") r["out"] = compact(k.log_softmax(t, b, th), b);
  if (c.op == "logsumexp") r["lse"] = k.logsumexp(t, b, th);
  if (c.op == "entropy") r["entropy"] = k.entropy(t, b, th);
  if (c.op == "adaptive_softmax") {
    const AdaptiveOutput o = k.adaptive_softmax(t, b, th);
    r["out"] = compact(o.weights, b);
    r["beta"] = o.beta;
    r["entropy"] = o.entropy;
  }
  return r;
}

std::string g9(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char b[40];
  std::snprintf(b, sizeof b, "%.9g", x);
  return b;
}
std::string ulps_text(double u) {
  if (std::isinf(u)) return "inf";
  char b[40];
  std::snprintf(b, sizeof b, "%.3g", u);
  return b;
}
// An element's index in a tensor of `shape`, e.g. [0, 1, 3].
std::string index_text(std::size_t i, const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> idx(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    const auto n = static_cast<std::size_t>(std::max<std::int64_t>(shape[d], 1));
    idx[d] = static_cast<std::int64_t>(i % n);
    i /= n;
  }
  std::ostringstream s;
  s << "[";
  for (std::size_t d = 0; d < idx.size(); ++d) s << (d ? "," : "") << idx[d];
  s << "]";
  return s.str();
}

int run_replay(const ReplayOptions& o) {
  // Every input is checked before any work: the case file, then the kernel choice.
  if (o.tolerance && !(*o.tolerance >= 0 && std::isfinite(*o.tolerance)))
    throw Usage("--tolerance-ulps " + g9(*o.tolerance) + ": expected a finite number >= 0");
  if (!(o.timeout > 0 && o.timeout <= 86400))
    throw Usage("--timeout " + g9(o.timeout) + ": expected seconds > 0 and <= 86400");
  CaseFile cf;
  try {
    cf = read_case_file(o.case_path);
  } catch (const std::invalid_argument& e) {
    throw Usage(e.what());
  }
  for (const auto& c : cf.calls) validate_call(c);
  if (int(!o.plugin.empty()) + int(!o.builtin.empty()) + int(!o.python.empty()) != 1)
    (void)pick(o);  // names the choice that is missing (Usage)
  const double tol =
      o.tolerance ? *o.tolerance : cf.meta.value("tolerance_ulps", kDefaultToleranceUlps);
  const nlohmann::json& verdict =
      cf.meta.contains("verdict") ? cf.meta["verdict"] : nlohmann::json();
  std::optional<gate::KernelSource> source;
  source.emplace(pick(o));
  if (const std::string why = source->why_cannot_run(); !why.empty())
    throw Usage(why + "; nothing was replayed");

  // This process judges; a kernel host runs the kernel (and, for a device
  // kernel, stages its buffers: this process never initialises CUDA).
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  std::unique_ptr<gate::KernelHost> host;
  std::string incidents;
  auto on_event = [&](const gate::HostEvent& e) {
    incidents += std::string(incidents.empty() ? "" : "; ") + "the kernel host " +
                 (e.kind == gate::HostEvent::Kind::crash  ? "crashed"
                  : e.kind == gate::HostEvent::Kind::hang ? "hung"
                                                          : "misbehaved") +
                 (e.op.empty() ? "" : " in " + e.op) +
                 (e.fault.empty() ? "" : " (" + e.fault + ")") +
                 (e.how.empty() ? "" : ": " + e.how);
  };
  try {
    host = std::make_unique<gate::KernelHost>(*source, gate::HostOptions{o.timeout, nullptr},
                                              on_event, [] {});
  } catch (const std::exception& e) {
    throw Usage(std::string("opening the kernel: ") + e.what());
  }
  const auto guarded = std::make_unique<gate::GuardedKernel>(
      host->kernel(), gate::GuardOptions{}, [&](const gate::GuardIncident& i) {
        incidents +=
            std::string(incidents.empty() ? "" : "; ") + i.kind + " in " + i.op + ": " + i.detail;
      });
  const Kernel& k = guarded->kernel();

  std::cout << "replay of " << o.case_path << "\n  recorded: " << verdict.value("property", "?")
            << " [" << verdict.value("kernel", "?") << "/" << verdict.value("op", "?") << "/"
            << verdict.value("dtype", "?") << "] failed\n  now:      kernel " << k.name() << " ("
            << k.origin() << "), "
            << "in a kernel host process"
            << "\n  tolerance: " << g9(tol)
            << " ulp of each output's largest exact value, against the correctly rounded "
               "values\n";
  bool fails = false;
  for (std::size_t ci = 0; ci < cf.calls.size(); ++ci) {
    const call_log::Call& c = cf.calls[ci];
    std::map<std::string, std::vector<float>> now;
    std::string error;
    try {
      now = run_call(k, c);
    } catch (const std::exception& e) {
      error = e.what();
    }
    std::cout << "call " << ci << ": " << c.op;
    for (const auto& a : c.args)
      if (a.name == "dtype" || a.name == "qkv_dtype" || a.name == "n" || a.name == "rows" ||
          a.name == "seqlen_q" || a.name == "seqlen_k" || a.name == "head_dim")
        std::cout << " " << a.name << "=" << (a.word.empty() ? g9(a.number) : a.word);
    std::cout << "\n";
    if (!error.empty()) {
      std::cout << "  the call failed: " << error
                << (incidents.empty() ? "" : " (" + incidents + ")") << "\n";
      fails = true;
      continue;
    }
    const auto* dtypes = cf.meta["calls"][ci].contains("output_dtypes")
                             ? &cf.meta["calls"][ci]["output_dtypes"]
                             : nullptr;
    for (const call_log::Array& rec : c.got) {
      const auto it = now.find(rec.name);
      const std::vector<float>* got = it == now.end() ? nullptr : &it->second;
      const auto ex = cf.expected[ci].find(rec.name);
      const std::vector<float>* exp = ex == cf.expected[ci].end() ? nullptr : &ex->second.f;
      const std::string dt =
          dtypes && dtypes->contains(rec.name) ? (*dtypes)[rec.name].get<std::string>() : "float32";
      if (!got) {
        std::cout << "  " << rec.name << ": the kernel no longer returns it\n";
        continue;
      }
      // Errors in ulps of this output's largest finite exact value (its scale).
      double scale = 0;
      if (exp)
        for (float e : *exp)
          if (std::isfinite(e)) scale = std::max(scale, std::abs(static_cast<double>(e)));
      std::size_t over = 0, changed = 0;
      double worst = 0;
      std::vector<std::string> lines;
      for (std::size_t i = 0; i < rec.f.size() && i < got->size(); ++i) {
        const double g = (*got)[i], r = rec.f[i];
        const bool same = std::isnan(g) ? std::isnan(r) : g == r;
        if (!same) ++changed;
        double ug = NAN, ur = NAN;
        if (exp && i < exp->size()) {
          ug = ulp_error(dt, g, (*exp)[i], scale);
          ur = ulp_error(dt, r, (*exp)[i], scale);
          if (!(ug <= tol)) ++over;
          worst = std::max(worst, std::isnan(ug) ? INFINITY : ug);
        }
        const bool show = rec.f.size() <= 16 || !same || !(ug <= tol) || !(ur <= tol);
        if (show && lines.size() < 24) {
          std::ostringstream l;
          l << "    " << rec.name << index_text(i, rec.shape) << "  expected "
            << (exp && i < exp->size() ? g9((*exp)[i]) : "(none)") << "  got " << g9(g) << " ("
            << ulps_text(ug) << " ulp)  recorded " << g9(r) << " (" << ulps_text(ur) << " ulp)"
            << (same ? "" : "  CHANGED");
          lines.push_back(l.str());
        }
      }
      std::cout << "  " << rec.name << " (" << dt << ", " << rec.f.size() << " values): ";
      if (exp)
        std::cout << over << " over " << g9(tol) << " ulp, worst " << ulps_text(worst)
                  << " ulp (ulps at its largest exact value, " << g9(scale) << "); ";
      else
        std::cout << "no reference value recorded (judged against the recorded, failing "
                     "output: unchanged still fails); ";
      std::cout << changed << " differ from the recorded got\n";
      for (const auto& l : lines) std::cout << l << "\n";
      if (over > 0) fails = true;
      // Without reference values (adaptive_softmax): the recorded output failed,
      // so the same output still fails.
      if (!exp && changed == 0) fails = true;
    }
  }
  if (!incidents.empty()) std::cout << "guard: " << incidents << "\n";
  std::cout << (fails ? "STILL FAILS" : "PASSES now") << " (" << o.case_path << ")\n";
  std::cout.flush();
  return fails ? exit_fail : exit_pass;
}

}  // namespace

void add_replay_command(CLI::App& app) {
  auto o = std::make_shared<ReplayOptions>();
  CLI::App* c = app.add_subcommand(
      "replay",
      "Run the kernel call recorded in a case file (check --cases-dir) again, in a kernel host "
      "process as the gate does, and print expected vs got vs the recorded got in ulps; exit 0 "
      "it now passes, 1 it still fails, 2 bad input");
  c->add_option("case", o->case_path, "Case file (.npz) written by check")->required();
  c->add_option("--plugin", o->plugin, "Kernel library (.so) built against softmax_audit/kernel.h");
  c->add_option("--kernel-index", o->kernel_index,
                "Which kernel of a multi-kernel plugin (sa_kernel_entry_at index)");
  c->add_option("--python", o->python, "A Python kernel: package.module:object");
  c->add_option("--builtin", o->builtin, "A built-in kernel by name");
  c->add_option("--tolerance-ulps", o->tolerance,
                "How far an output may be from its correctly rounded value, in ulps of that "
                "output's largest exact value (default: the case's tolerance_ulps, 4)");
  c->add_option("--timeout", o->timeout,
                "Seconds the call (or opening the kernel) may take (default 60)");
  c->callback([o] {
    try {
      exit_code() = run_replay(*o);
    } catch (const Usage& e) {
      std::cerr << "softmax-audit replay: error: " << e.what() << "\n";
      exit_code() = exit_usage;
    }
  });
}

}  // namespace sa::cli

// The gate against misbehaving plugins (issue 12): each case is a library
// from tests/gate/kernels/hostile_kernel.c driven through the real command
// line, and each test states the exit code and verdict the gate must give.
// None of these may hang the gate, kill it, or end in exit 0 for a kernel
// that was not checked or that failed.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "gate/report.hpp"
#include "gate_test_util.hpp"

namespace fs = std::filesystem;
using gate_test::q;
using gate_test::run;
using gate_test::slurp;

namespace {

const std::string cli = SA_GATE_CLI;

std::string lib(const std::string& behaviour) {
  return std::string(SA_GATE_HOSTILE_DIR) + "/libhostile_" + behaviour + ".so";
}

// A small spec: few properties and cases, so that each test takes seconds.
std::string small_spec(const std::string& dir, const std::string& extra = "") {
  const std::string path = dir + "/spec.toml";
  std::ofstream(path) << "properties = [\"differential.ulp\", \"metamorphic.sum_to_one\"]\n"
                         "dtypes = [\"float32\"]\ncases = 4\nseed = 7\n"
                      << extra;
  return path;
}

struct Checked {
  gate_test::Ran ran;
  nlohmann::json json;  // the --json output, or null when none was written
  double seconds = 0;
};

// env: variable assignments for this command only ("A=1 B=2 "), or "".
Checked check(const std::string& plugin, const std::string& args, const std::string& env = "") {
  const std::string dir = gate_test::temp_dir();
  const std::string out = dir + "/gate.json";
  Checked c;
  const auto t0 = std::chrono::steady_clock::now();
  c.ran = run("cd " + q(dir) + " && " + env + q(cli) + " check --plugin " + q(plugin) + " --json " +
              q(out) + " " + args);
  c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (fs::exists(out)) c.json = nlohmann::json::parse(slurp(out));
  return c;
}

// The verdicts of property `id` in a --json output.
std::vector<nlohmann::json> verdicts_of(const nlohmann::json& j, const std::string& id) {
  std::vector<nlohmann::json> out;
  if (j.is_null()) return out;
  for (const auto& run : j.at("runs"))
    for (const auto& v : run.at("verdicts"))
      if (v.value("property", "") == id) out.push_back(v);
  return out;
}

bool any_outcome(const std::vector<nlohmann::json>& vs, const std::string& outcome) {
  for (const auto& v : vs)
    if (v.value("outcome", "") == outcome) return true;
  return false;
}

// The fake CUDA runtime (tests/gate/fake_cudart.c) for the CUDA-memory test
// kernels: named in SA_CUDA_RUNTIME for one command only, with its log.
struct FakeDevice {
  std::string log, env;
};
FakeDevice fake_device(const std::string& dir) {
  FakeDevice f;
  f.log = dir + "/fake-cuda.log";
  f.env = "SA_CUDA_RUNTIME=" + q(SA_GATE_FAKE_CUDART) + " SA_FAKE_CUDA_LOG=" + q(f.log) + " ";
  return f;
}

// One line of the fake runtime's log: a process that loaded it, asked it for
// a device, or allocated device memory.
struct FakeUse {
  std::string what;
  long pid = 0, ppid = 0;
  int filters = -1, parent_filters = -1;
  // A kernel host: one seccomp filter more than the judge that forked it.
  bool host() const { return filters >= 0 && filters > parent_filters; }
};
std::vector<FakeUse> fake_uses(const std::string& log) {
  std::vector<FakeUse> uses;
  std::istringstream in(slurp(log));
  for (std::string line; std::getline(in, line);) {
    FakeUse u;
    char what[16] = {};
    if (std::sscanf(line.c_str(), "%15s pid=%ld ppid=%ld filters=%d parent_filters=%d", what,
                    &u.pid, &u.ppid, &u.filters, &u.parent_filters) == 5) {
      u.what = what;
      uses.push_back(u);
    }
  }
  return uses;
}

}  // namespace

// Item 3: constructors, the entry function and destructors never run in the
// gate's own process. Each of these used to end the gate (exit 0 with no
// output, or 139) or hang it.
TEST(HostilePlugin, ConstructorCallingExitIsALoadErrorNotAPass) {
  const std::string dir = gate_test::temp_dir();
  const auto c = check(lib("ctor_exit"), "--spec " + q(small_spec(dir)));
  EXPECT_EQ(c.ran.rc, 2) << c.ran.output;
  EXPECT_NE(c.ran.output.find("exited with status 0"), std::string::npos) << c.ran.output;
  EXPECT_NE(c.ran.output.find("nothing was checked"), std::string::npos) << c.ran.output;
  EXPECT_TRUE(c.json.is_null()) << "no result file may exist for a run that checked nothing";
}

TEST(HostilePlugin, ConstructorCrashIsALoadErrorNamingTheSignal) {
  const std::string dir = gate_test::temp_dir();
  const auto c = check(lib("ctor_crash"), "--spec " + q(small_spec(dir)));
  EXPECT_EQ(c.ran.rc, 2) << c.ran.output;
  // Under AddressSanitizer its SEGV handler reports the crash and exits
  // instead of letting the signal kill the probe process.
  EXPECT_TRUE(c.ran.output.find("signal 11") != std::string::npos ||
              c.ran.output.find("AddressSanitizer") != std::string::npos)
      << c.ran.output;
  EXPECT_NE(c.ran.output.find("nothing was checked"), std::string::npos) << c.ran.output;
}

TEST(HostilePlugin, HangingConstructorIsBoundedByTheTimeout) {
  const std::string dir = gate_test::temp_dir();
  const auto c = check(lib("ctor_hang"), "--timeout 1 --spec " + q(small_spec(dir)));
  EXPECT_EQ(c.ran.rc, 2) << c.ran.output;
  EXPECT_NE(c.ran.output.find("did not finish within"), std::string::npos) << c.ran.output;
  EXPECT_LT(c.seconds, 20);
}

TEST(HostilePlugin, CrashingEntryFunctionIsALoadError) {
  const std::string dir = gate_test::temp_dir();
  const auto c = check(lib("entry_crash"), "--spec " + q(small_spec(dir)));
  EXPECT_EQ(c.ran.rc, 2) << c.ran.output;
  EXPECT_NE(c.ran.output.find("sa_kernel_entry"), std::string::npos) << c.ran.output;
}

TEST(HostilePlugin, DestructorCallingExitCannotTurnAFailureIntoAPass) {
  const std::string dir = gate_test::temp_dir();
  const auto c = check(lib("dtor_exit_biased"), "--spec " + q(small_spec(dir)));
  EXPECT_EQ(c.ran.rc, 1) << c.ran.output;
  EXPECT_TRUE(any_outcome(verdicts_of(c.json, "differential.ulp"), "fail")) << c.json.dump();
}

TEST(HostilePlugin, CrashingDestructorIsAFailingVerdictAndTheResultsAreWritten) {
  const std::string dir = gate_test::temp_dir();
  const auto c = check(lib("dtor_crash"), "--spec " + q(small_spec(dir)));
  EXPECT_EQ(c.ran.rc, 1) << c.ran.output;
  const auto vs = verdicts_of(c.json, "gate.no_crash");
  ASSERT_TRUE(any_outcome(vs, "fail")) << c.json.dump();
  EXPECT_NE(vs[0].dump().find("dlclose"), std::string::npos) << vs[0].dump();
}

// Item 3: a bare library name is the file in the current directory, loaded
// by its resolved path, never a copy found on the library search path.
TEST(HostilePlugin, BareNameLoadsTheLocalFileNotOneOnTheSearchPath) {
  const std::string dir = gate_test::temp_dir(), other = gate_test::temp_dir();
  fs::copy_file(SA_GATE_EXAMPLE_KERNEL, dir + "/libk.so");
  fs::copy_file(lib("dtor_exit_biased"), other + "/libk.so");  // a failing kernel
  const auto ran = run("cd " + q(dir) + " && LD_LIBRARY_PATH=" + q(other) + " " + q(cli) +
                       " check --plugin libk.so --json out.json --spec " + q(small_spec(dir)));
  EXPECT_EQ(ran.rc, 0) << ran.output;
  const auto j = nlohmann::json::parse(slurp(dir + "/out.json"));
  EXPECT_EQ(j.at("runs").at(0).at("kernel").value("origin", ""),
            fs::canonical(dir + "/libk.so").string());
}

// Item 1: a crash in an op that a property calls without listing it (the
// streamed-entropy property checks entropy and calls softmax) used to be
// retried forever. Every retry must make progress and the run must end with
// the exact byte offset.
TEST(HostilePlugin, CrashInAHelperOpEndsWithAVerdictForEveryProperty) {
  const std::string dir = gate_test::temp_dir();
  const std::string spec = dir + "/spec.toml";
  std::ofstream(spec) << "properties = [\"metamorphic.streamed_entropy\", "
                         "\"metamorphic.sum_to_one\"]\ndtypes = [\"float32\"]\n"
                         "sizes = [100]\ncases = 3\nseed = 3\n";
  const auto c = check(lib("helper_oob"), "--timeout 20 --deadline 120 --spec " + q(spec));
  EXPECT_EQ(c.ran.rc, 1) << c.ran.output;
  EXPECT_LT(c.seconds, 60);
  const auto oob = verdicts_of(c.json, "gate.in_bounds");
  ASSERT_TRUE(any_outcome(oob, "fail")) << c.json.dump();
  EXPECT_NE(oob[0].dump().find("bytes past"), std::string::npos) << oob[0].dump();
  EXPECT_FALSE(verdicts_of(c.json, "metamorphic.sum_to_one").empty()) << c.json.dump();
  EXPECT_LT(c.json.at("runs").at(0).value("processes", 0), 12) << c.json.dump();
}

// Item 5: helper processes a kernel forks die with it, so the gate's output
// pipe closes (`check | tee` used to never end).
TEST(HostilePlugin, ForkedHelperProcessesDieWithTheKernel) {
  const std::string dir = gate_test::temp_dir();
  const auto c = check(lib("fork_helper"), "--spec " + q(small_spec(dir)) + " | cat");
  EXPECT_EQ(c.ran.rc, 0) << c.ran.output;
  EXPECT_LT(c.seconds, 60) << "a forked helper kept the gate's output open";
}

// Item 5: a kernel that blocks in every call costs one timeout per op, not
// one per property; the gate stops calling an op that hung and says so.
TEST(HostilePlugin, AfterAHangTheOpIsCalledNoMore) {
  const std::string dir = gate_test::temp_dir();
  const auto c = check(lib("block_always"), "--timeout 1 --spec " + q(small_spec(dir)));
  EXPECT_EQ(c.ran.rc, 1) << c.ran.output;
  EXPECT_LT(c.seconds, 15);
  const auto hangs = verdicts_of(c.json, "gate.no_hang");
  ASSERT_TRUE(any_outcome(hangs, "fail")) << c.json.dump();
  EXPECT_NE(c.json.dump().find("no more in this run"), std::string::npos) << c.json.dump();
}

// Item 5: the overall deadline bounds the run and names what was not run.
TEST(HostilePlugin, OverallDeadlineEndsTheRunAndNamesWhatWasNotRun) {
  const std::string dir = gate_test::temp_dir();
  const auto c =
      check(lib("block_always"), "--timeout 30 --deadline 2 --spec " + q(small_spec(dir)));
  // Nothing failed before the deadline (no case reached the 30 s timeout), but the
  // requested checks did not all run: exit 3, "incomplete".
  EXPECT_EQ(c.ran.rc, 3) << c.ran.output;
  EXPECT_LT(c.seconds, 15);
  const auto d = verdicts_of(c.json, "gate.deadline");
  ASSERT_FALSE(d.empty()) << c.json.dump();
  EXPECT_NE(d[0].dump().find("differential.ulp"), std::string::npos) << d[0].dump();
}

// Issue 13: forged messages on the gate's pipe never produce a pass.
TEST(HostilePlugin, ForgedCompletionMessagesAreAFailingVerdict) {
  const std::string dir = gate_test::temp_dir();
  const auto c = check(lib("fake_done"), "--spec " + q(small_spec(dir)));
  EXPECT_EQ(c.ran.rc, 1) << c.ran.output;
  EXPECT_TRUE(any_outcome(verdicts_of(c.json, "gate.protocol"), "fail")) << c.json.dump();
}

// What a forging kernel's run must show: a failing run (exit 1, never PASS),
// differential.ulp failed and never passed on its NaN outputs, and the forger
// (which says so on stderr) opened neither its parent's nor its grandparent's
// memory for writing.
void expect_forgery_failed(const Checked& c) {
  EXPECT_EQ(c.ran.rc, 1) << c.ran.output;
  ASSERT_FALSE(c.json.is_null()) << c.ran.output;
  EXPECT_EQ(c.json.at("runs").at(0).at("summary").value("status", ""), "fail") << c.json.dump();
  EXPECT_EQ(c.ran.output.find("\nPASS"), std::string::npos) << c.ran.output;
  EXPECT_TRUE(any_outcome(verdicts_of(c.json, "differential.ulp"), "fail")) << c.json.dump();
  EXPECT_FALSE(any_outcome(verdicts_of(c.json, "differential.ulp"), "pass")) << c.json.dump();
  EXPECT_TRUE(any_outcome(verdicts_of(c.json, "gate.no_nan_output"), "fail")) << c.json.dump();
  EXPECT_NE(c.ran.output.find("hostile forge: the parent's memory"), std::string::npos)
      << c.ran.output;
  EXPECT_EQ(c.ran.output.find("opened for writing"), std::string::npos) << c.ran.output;
}

// Issue 29: a kernel that finds the gate's message token in its own memory
// and writes "pass" verdicts and "done" with it (every output it computes is
// NaN) got PASS, exit 0, when the suite ran in the kernel's process. The
// suite now runs in a judge process that never runs kernel code: the forged
// lines reach only the kernel host's socket, and neither the judge's nor the
// gate's memory can be opened from the host.
TEST(HostilePlugin, VerdictsForgedFromTheKernelsMemoryAreNeverAPass) {
  const std::string dir = gate_test::temp_dir();
  const auto c = check(lib("forge"), "--spec " + q(small_spec(dir)));
  expect_forgery_failed(c);
}

// Issue 29: a kernel host restarted after a crash is forked by the judge,
// whose references have run OpenMP by then. Forked from that thread, the new
// host inherited a libgomp pool without its threads, and the kernel's next
// parallel region (log_softmax here) waited for them until the timeout.
TEST(HostilePlugin, AnOpenMPKernelRunsInAHostRestartedAfterACrash) {
  const std::string dir = gate_test::temp_dir();
  const std::string spec = dir + "/spec.toml";
  std::ofstream(spec) << "properties = [\"differential.ulp\", \"metamorphic.sum_to_one\", "
                         "\"special.values\"]\nops = [\"softmax\", \"log_softmax\"]\n"
                         "dtypes = [\"float32\", \"bfloat16\"]\nsizes = [3, 5000, 70000]\n"
                         "cases = 6\nseed = 7\n";
  const auto c = check(lib("omp_after_crash"), "--timeout 10 --spec " + q(spec));
  EXPECT_EQ(c.ran.rc, 1) << c.ran.output;
  EXPECT_TRUE(any_outcome(verdicts_of(c.json, "gate.no_crash"), "fail")) << c.json.dump();
  EXPECT_FALSE(any_outcome(verdicts_of(c.json, "gate.no_hang"), "fail")) << c.json.dump();
  bool log_softmax_passed = false;
  for (const auto& v : verdicts_of(c.json, "differential.ulp"))
    if (v.value("op", "") == "log_softmax" && v.value("outcome", "") == "pass")
      log_softmax_passed = true;
  EXPECT_TRUE(log_softmax_passed) << c.json.dump();
}

// Issue 29, device kernels: a CUDA-memory kernel is hosted like any other.
// Its kernel host stages the arena's buffers to the device (here the fake
// runtime of tests/gate/fake_cudart.c, whose allocations are mappings of
// their own) and back; the judge never loads a CUDA runtime. Before, the
// judge opened a device kernel itself and staged its buffers in its own
// process. The kernel refuses any buffer that is not device memory,
// attention_v2's included (tensors, lse, cu_seqlens of the varlen cases; with
// seed 3, varlen_equals_separate makes calls whose k and v have no elements,
// which the guard leaves outside the arena: they too must be device pointers).
TEST(HostilePlugin, ACudaMemoryKernelRunsInAKernelHostAndTheJudgeNeverLoadsCuda) {
  const std::string dir = gate_test::temp_dir();
  const FakeDevice dev = fake_device(dir);
  const std::string spec = dir + "/spec.toml";
  std::ofstream(spec) << "properties = [\"differential.ulp\", \"attention_v2.rounding\", "
                         "\"attention_v2.varlen_equals_separate\"]\n"
                         "dtypes = [\"float32\"]\ncases = 2\nseed = 3\n";
  const auto c = check(lib("cuda_ok"), "--spec " + q(spec), dev.env);
  EXPECT_EQ(c.ran.rc, 0) << c.ran.output;
  EXPECT_TRUE(any_outcome(verdicts_of(c.json, "differential.ulp"), "pass")) << c.json.dump();
  EXPECT_TRUE(any_outcome(verdicts_of(c.json, "attention_v2.varlen_equals_separate"), "pass"))
      << c.json.dump();
  EXPECT_FALSE(any_outcome(verdicts_of(c.json, "attention_v2.rounding"), "fail")) << c.json.dump();
  // Checks the guard makes in the judge, once reported only for host-memory kernels.
  EXPECT_TRUE(any_outcome(verdicts_of(c.json, "gate.in_bounds"), "pass")) << c.json.dump();
  EXPECT_TRUE(any_outcome(verdicts_of(c.json, "gate.fp_environment"), "pass")) << c.json.dump();
  const std::vector<FakeUse> uses = fake_uses(dev.log);
  if (!uses.empty() && uses[0].filters < 0)
    GTEST_SKIP() << "this kernel does not report Seccomp_filters: hosts cannot be told apart";
  std::set<long> judges;
  int allocs = 0;
  for (const auto& u : uses) {
    if (u.what == "alloc") {
      ++allocs;
      EXPECT_TRUE(u.host()) << "device memory allocated outside a kernel host: " << slurp(dev.log);
    }
    if (u.host()) judges.insert(u.ppid);
  }
  EXPECT_GT(allocs, 0) << "the kernel never got device memory: " << slurp(dev.log);
  ASSERT_FALSE(judges.empty()) << slurp(dev.log);
  for (const auto& u : uses)
    EXPECT_EQ(judges.count(u.pid), 0u)
        << "a judge (pid " << u.pid << ") loaded the CUDA runtime: " << slurp(dev.log);
}

TEST(HostilePlugin, ACudaMemoryKernelWithoutADeviceChecksNothing) {
  const std::string dir = gate_test::temp_dir();
  const FakeDevice dev = fake_device(dir);
  const auto c =
      check(lib("cuda_ok"), "--spec " + q(small_spec(dir)), dev.env + "SA_FAKE_CUDA_DEVICES=0 ");
  EXPECT_EQ(c.ran.rc, 2) << c.ran.output;
  EXPECT_NE(c.ran.output.find("no CUDA device is usable"), std::string::npos) << c.ran.output;
  EXPECT_NE(c.ran.output.find("nothing was checked"), std::string::npos) << c.ran.output;
  EXPECT_TRUE(c.json.is_null());
}

// The forger of VerdictsForgedFromTheKernelsMemoryAreNeverAPass on device
// memory: it got PASS, exit 0, while the judge ran device kernels itself.
TEST(HostilePlugin, ACudaMemoryKernelCannotForgeItsVerdicts) {
  const std::string dir = gate_test::temp_dir();
  const FakeDevice dev = fake_device(dir);
  const auto c = check(lib("cuda_forge"), "--spec " + q(small_spec(dir)), dev.env);
  expect_forgery_failed(c);
}

// A device kernel that crashes ends its kernel host, not the judge: a
// failing gate.no_crash naming the op, and the run goes on in a fresh host
// (log_softmax, called after the crash, still passes).
TEST(HostilePlugin, ACrashingCudaMemoryKernelIsACrashVerdict) {
  const std::string dir = gate_test::temp_dir();
  const FakeDevice dev = fake_device(dir);
  const auto c = check(lib("cuda_crash"),
                       "--timeout 20 --spec " + q(small_spec(dir, "sizes = [5, 100]\n")), dev.env);
  EXPECT_EQ(c.ran.rc, 1) << c.ran.output;
  const auto crashes = verdicts_of(c.json, "gate.no_crash");
  ASSERT_TRUE(any_outcome(crashes, "fail")) << c.json.dump();
  EXPECT_NE(crashes[0].dump().find("softmax"), std::string::npos) << crashes[0].dump();
  bool log_softmax_passed = false;
  for (const auto& v : verdicts_of(c.json, "differential.ulp"))
    if (v.value("op", "") == "log_softmax" && v.value("outcome", "") == "pass")
      log_softmax_passed = true;
  EXPECT_TRUE(log_softmax_passed) << c.json.dump();
}

// Writing a device input faults nowhere: the kernel host copies the device
// copies of the inputs back and the judge compares them with its own.
// Before, the input's device copy was never read back.
TEST(HostilePlugin, ACudaMemoryKernelWritingItsDeviceInputIsCaught) {
  const std::string dir = gate_test::temp_dir();
  const FakeDevice dev = fake_device(dir);
  const auto c = check(lib("cuda_input_write"), "--spec " + q(small_spec(dir)), dev.env);
  EXPECT_EQ(c.ran.rc, 1) << c.ran.output;
  const auto oob = verdicts_of(c.json, "gate.in_bounds");
  ASSERT_TRUE(any_outcome(oob, "fail")) << c.json.dump();
  EXPECT_NE(oob[0].dump().find("wrote into input buffer 'in' at byte "), std::string::npos)
      << oob[0].dump();
}

// Issue 13: a kernel that forks inside a call does not get its verdicts twice.
TEST(HostilePlugin, ForkInACallIsAFailingVerdictNotDuplicatedVerdicts) {
  const std::string dir = gate_test::temp_dir();
  const auto c = check(lib("fork_in_call"), "--spec " + q(small_spec(dir)));
  EXPECT_EQ(c.ran.rc, 1) << c.ran.output;
  EXPECT_TRUE(any_outcome(verdicts_of(c.json, "gate.protocol"), "fail")) << c.json.dump();
  std::set<std::string> keys;
  for (const auto& v : c.json.at("runs").at(0).at("verdicts")) {
    const std::string p = v.value("property", "");
    if (p.rfind("gate.", 0) == 0) continue;
    EXPECT_TRUE(keys.insert(p + "|" + v.value("op", "") + "|" + v.value("dtype", "")).second)
        << "duplicated verdict " << v.dump();
  }
}

// Issue 13: a call that leaves flush-to-zero / denormals-are-zero set is a
// named verdict, and the following checks run in the default environment.
TEST(HostilePlugin, ChangedFloatingPointEnvironmentIsANamedVerdict) {
#if !defined(__x86_64__)
  GTEST_SKIP() << "the FTZ/DAZ kernel sets x86 MXCSR bits";
#endif
  const std::string dir = gate_test::temp_dir();
  const auto c = check(lib("fp_env"), "--spec " + q(small_spec(dir)));
  EXPECT_EQ(c.ran.rc, 1) << c.ran.output;
  const auto vs = verdicts_of(c.json, "gate.fp_environment");
  ASSERT_TRUE(any_outcome(vs, "fail")) << c.json.dump();
  EXPECT_NE(vs[0].dump().find("flush-to-zero"), std::string::npos) << vs[0].dump();
  EXPECT_TRUE(any_outcome(verdicts_of(c.json, "differential.ulp"), "pass")) << c.json.dump();
}

TEST(HostilePlugin, CorrectKernelPassesTheFloatingPointEnvironmentCheck) {
  const std::string dir = gate_test::temp_dir();
  const auto c = check(SA_GATE_EXAMPLE_KERNEL, "--spec " + q(small_spec(dir)));
  EXPECT_EQ(c.ran.rc, 0) << c.ran.output;
  EXPECT_TRUE(any_outcome(verdicts_of(c.json, "gate.fp_environment"), "pass")) << c.json.dump();
  EXPECT_TRUE(any_outcome(verdicts_of(c.json, "gate.protocol"), "pass")) << c.json.dump();
}

// Item 7: a name with a newline could fake a PASS line in a CI log; such a
// descriptor is refused when loaded.
TEST(HostilePlugin, ControlCharactersInTheNameAreALoadError) {
  const std::string dir = gate_test::temp_dir();
  const auto c = check(lib("name_newline"), "--spec " + q(small_spec(dir)));
  EXPECT_EQ(c.ran.rc, 2) << c.ran.output;
  EXPECT_NE(c.ran.output.find("control character"), std::string::npos) << c.ran.output;
  EXPECT_EQ(c.ran.output.find("\nPASS 99"), std::string::npos) << c.ran.output;
}

// Item 4: an earlier run's passing file is never left where this run's
// would be; a run that checked nothing leaves no file at all.
TEST(HostilePlugin, AnEarlierRunsOutputIsNeverLeftBehind) {
  const std::string dir = gate_test::temp_dir();
  const std::string out = dir + "/gate.json", junit = dir + "/gate.xml";
  std::ofstream(out) << "{\"stale\": true}";
  std::ofstream(junit) << "<testsuites/>";
  const auto ran = run(q(cli) + " check --plugin " + q(lib("ctor_crash")) + " --json " + q(out) +
                       " --junit " + q(junit));
  EXPECT_EQ(ran.rc, 2) << ran.output;
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::exists(junit));
}

// Item 4: an output that cannot be written is an error (exit 2) named on
// the terminal, after the summary; the other outputs are still written.
TEST(HostilePlugin, AnUnwritableOutputIsAnErrorAndTheOthersAreKept) {
  const std::string dir = gate_test::temp_dir();
  const auto c = check(SA_GATE_EXAMPLE_KERNEL,
                       "--spec " + q(small_spec(dir)) + " --junit /proc/self/no-such-dir/x.xml");
  EXPECT_EQ(c.ran.rc, 2) << c.ran.output;
  EXPECT_NE(c.ran.output.find("--junit /proc/self/no-such-dir/x.xml"), std::string::npos)
      << c.ran.output;
}

// Item 6: option values outside their range are refused before any work,
// in one line naming the option and what was expected.
TEST(HostilePlugin, OutOfRangeOptionsAreUsageErrors) {
  const std::string dir = gate_test::temp_dir();
  for (const std::string& bad :
       {std::string("--timeout -1"), std::string("--timeout nan"), std::string("--cases 0"),
        std::string("--cases 4294967297"), std::string("--seed -5"), std::string("--deadline 0"),
        "--spec " + q(dir)}) {
    const auto ran = run(q(cli) + " check --builtin naive " + bad);
    EXPECT_EQ(ran.rc, 2) << bad << ": " << ran.output;
    const std::string opt = bad.substr(0, bad.find(' '));
    EXPECT_NE(ran.output.find(opt == "--spec" ? dir : opt), std::string::npos)
        << bad << ": " << ran.output;
    EXPECT_LE(std::count(ran.output.begin(), ran.output.end(), '\n'), 2) << ran.output;
  }
}

// Item 2: nothing taken from an input reaches gnuplot (or a shell) unescaped.
// A kernel named with backquotes and $(...) is swept and reported; its name
// used to run as a command in the job rendering the report. Every text field
// of a sweep file (kernel, dtype, distribution, metric, label) gets the same.
TEST(HostileInput, ReportRunsNoCommandFromAnyInputField) {
  if (!sa::gate::gnuplot_available("gnuplot"))
    GTEST_SKIP() << "gnuplot is not installed (apt-get install gnuplot-nox): nothing to inject";
  const std::string dir = gate_test::temp_dir();
  const auto swept =
      run("cd " + q(dir) + " && " + q(cli) + " sweep --plugin " + q(lib("name_shell")) +
          " --out sw --min-log2-n 4 --max-log2-n 6 --dtype float32"
          " --distribution uniform --samples 8");
  ASSERT_EQ(swept.rc, 0) << swept.output;
  const std::string evil = "x`touch hostile-field-ran`$(touch hostile-field-ran)'\"@x\n";
  nlohmann::json series = {{"kernel", evil},
                           {"dtype", evil},
                           {"distribution", evil},
                           {"metric", "max_weight"},
                           {"label", evil},
                           {"x", "n"},
                           {"points", {{16, 0.5}, {32, 0.25}}}};
  nlohmann::json series2 = series;
  series2["metric"] = "softmax_max_rel_error" + evil;
  std::ofstream(dir + "/evil.json") << nlohmann::json{{"series", {series, series2}}}.dump();
  const auto checked =
      run("cd " + q(dir) + " && " + q(cli) +
          " check --builtin naive --cases 2 --json r.json --spec " + q(small_spec(dir)));
  for (const std::string& sweep : {std::string("sw/sweep.json"), std::string("evil.json")}) {
    const auto rep = run("cd " + q(dir) + " && " + q(cli) + " report --results r.json --sweep " +
                         sweep + " --html report.html");
    EXPECT_EQ(rep.rc, 0) << rep.output;
    EXPECT_NE(slurp(dir + "/report.html").find("<svg"), std::string::npos)
        << "no plot was drawn, so the test proved nothing";
  }
  EXPECT_FALSE(fs::exists(dir + "/hostile-name-ran")) << "a kernel name ran as a command";
  EXPECT_FALSE(fs::exists(dir + "/hostile-field-ran")) << "a sweep field ran as a command";
}

// Item 6: limits stated and enforced before any work.
TEST(HostileInput, SweepBeyondTheMachinesMemoryIsRefusedWithTheEstimate) {
  const std::string dir = gate_test::temp_dir();
  // 32 bytes per element: 2^27 needs about 4 GiB, more than the 1 GiB allowed.
  const auto ran = run("cd " + q(dir) + " && " + q(cli) +
                       " sweep --builtin naive --out sw --min-log2-n 27 --max-log2-n 27"
                       " --max-memory 1");
  EXPECT_EQ(ran.rc, 2) << ran.output;
  EXPECT_NE(ran.output.find("GiB"), std::string::npos) << ran.output;
  EXPECT_NE(ran.output.find("--max-log2-n"), std::string::npos) << ran.output;
  EXPECT_FALSE(fs::exists(dir + "/sw/sweep.csv")) << "work started before the refusal";
}

TEST(HostileInput, DeeplyNestedJsonIsRefusedNamingTheFile) {
  const std::string dir = gate_test::temp_dir();
  std::ofstream(dir + "/deep.json") << std::string(100000, '[') << std::string(100000, ']');
  for (const std::string& opt : {std::string("--results"), std::string("--sweep")}) {
    const std::string args =
        opt == "--results" ? "--results deep.json" : "--results deep.json --sweep deep.json";
    const auto ran =
        run("cd " + q(dir) + " && " + q(cli) + " report " + args + " --html report.html");
    EXPECT_EQ(ran.rc, 2) << ran.output;
    EXPECT_NE(ran.output.find("deep.json"), std::string::npos) << ran.output;
    EXPECT_NE(ran.output.find("nested deeper"), std::string::npos) << ran.output;
  }
  std::ofstream(dir + "/typed.json")
      << R"({"format":"softmax-audit-results","runs":[{"kernel":7}]})";
  const auto typed =
      run("cd " + q(dir) + " && " + q(cli) + " report --results typed.json --html report.html");
  EXPECT_EQ(typed.rc, 2) << typed.output;
  EXPECT_NE(typed.output.find("typed.json"), std::string::npos) << typed.output;
}

// Item 6: `bounds` used to print results for NaN or infinite weights and
// `--scale nan`, to drop NaN logits silently and to print `--n 1e20` as
// -9223372036854775808. Each is now a one-line error naming the input.
TEST(HostileInput, BoundsRefusesNonFiniteAndOutOfRangeInputs) {
  const std::string dir = gate_test::temp_dir();
  std::ofstream(dir + "/q.txt") << "1 0\n0 1\n";
  std::ofstream(dir + "/bad.txt") << "1 nan\n0 1\n";
  std::ofstream(dir + "/y.txt") << "1 1\n";
  std::ofstream(dir + "/x.txt") << "1 0\n0 1\n";
  const std::string t3 = " --weights-k q.txt --query y.txt --items x.txt";
  struct Case {
    std::string args, must_name;
  };
  for (const Case& c :
       {Case{"--weights-q bad.txt" + t3, "bad.txt"},
        Case{"--weights-q q.txt" + t3 + " --scale nan", "--scale"},
        Case{"--weights-q q.txt" + t3 + " --scale inf", "--scale"},
        Case{"--logits '1, nan, 2'", "--logits"}, Case{"--logits '1, inf, 2'", "--logits"},
        Case{"--spread 3 --n 1e20", "--n"}}) {
    const auto ran = run("cd " + q(dir) + " && " + q(cli) + " bounds " + c.args);
    EXPECT_EQ(ran.rc, 2) << c.args << ": " << ran.output;
    EXPECT_NE(ran.output.find(c.must_name), std::string::npos) << c.args << ": " << ran.output;
    EXPECT_LE(std::count(ran.output.begin(), ran.output.end(), '\n'), 1) << ran.output;
  }
}

// Item 7: text from a kernel or an input (here a plugin path with a newline)
// never starts a new line in the terminal summary.
TEST(HostileInput, NoInputTextCanFakeALineOfTheSummary) {
  const std::string dir = gate_test::temp_dir();
  const std::string evil = dir + "/lib\nPASS  99 passed.so";
  fs::copy_file(SA_GATE_EXAMPLE_KERNEL, evil);
  const auto ran = run(q(cli) + " check --plugin " + q(evil) + " --spec " + q(small_spec(dir)));
  EXPECT_EQ(ran.rc, 0) << ran.output;
  EXPECT_EQ(ran.output.find("\nPASS  99"), std::string::npos) << ran.output;
  EXPECT_NE(ran.output.find("\\x0aPASS  99"), std::string::npos) << ran.output;
}

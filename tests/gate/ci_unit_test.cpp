// Issue 13, in-process: every freedom kernel.h grants a caller is exercised
// (and survives the guard), verdict texts say what happened.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <set>
#include <sstream>

#include "gate/guard.hpp"
#include "gate/results.hpp"
#include "kernels/naive/naive_kernel.hpp"
#include "properties/checks.hpp"
#include "properties/suite.hpp"

using namespace sa;

namespace {

// A spy in front of the naive kernel: records the layouts it is called with.
struct Seen {
  bool in_place = false, out_stride_differs = false, in_stride_not_n = false, out_not_n = false;
  bool several_rows = false, merge_aliased = false, attention_strides_distinct = false;
  std::int64_t max_n = 0;
  std::set<double> temperatures;
  std::set<std::int64_t> sizes;
  bool corrupt_row0_of_two = false;  // make the kernel wrong on row 0 of two-row batches
};
Seen g_seen;

void note_rows(const sa_rows* s, const void* in, const void* out) {
  if (!s) return;
  if (in == out) g_seen.in_place = true;
  if (s->out_stride != s->in_stride) g_seen.out_stride_differs = true;
  if (s->in_stride != s->n) g_seen.in_stride_not_n = true;
  if (out && s->out_stride != s->n) g_seen.out_not_n = true;
  if (s->rows > 1) g_seen.several_rows = true;
  g_seen.max_n = std::max(g_seen.max_n, s->n);
  g_seen.sizes.insert(s->n);
  g_seen.temperatures.insert(s->temperature);
}

const sa_kernel& inner() { return *kernels::naive_kernel(); }

sa_status spy_softmax(void*, sa_dtype t, const sa_rows* s, const void* in, void* out) {
  note_rows(s, in, out);
  const sa_status r = inner().softmax(inner().ctx, t, s, in, out);
  if (r == SA_OK && g_seen.corrupt_row0_of_two && s->rows == 2 && t == SA_F32)
    static_cast<float*>(out)[0] += 0.25f;
  return r;
}
sa_status spy_log_softmax(void*, sa_dtype t, const sa_rows* s, const void* in, void* out) {
  note_rows(s, in, out);
  return inner().log_softmax(inner().ctx, t, s, in, out);
}
sa_status spy_lse(void*, sa_dtype t, const sa_rows* s, const void* in, float* lse) {
  note_rows(s, in, nullptr);
  return inner().logsumexp(inner().ctx, t, s, in, lse);
}
sa_status spy_attention(void*, const sa_attention_args* a) {
  if (a->q_stride != a->d && a->k_stride != a->d && a->v_stride != a->dv &&
      a->out_stride != a->dv && a->q_stride != a->k_stride)
    g_seen.attention_strides_distinct = true;
  return inner().attention(inner().ctx, a);
}
sa_status spy_merge(void*, std::int64_t rows, std::int64_t dv, const float* oa, const float* la,
                    const float* ob, const float* lb, float* out, float* out_lse) {
  if (out == oa && out_lse == la) g_seen.merge_aliased = true;
  return inner().merge_attention_states(inner().ctx, rows, dv, oa, la, ob, lb, out, out_lse);
}

sa_kernel make_spy() {
  sa_kernel k{};
  k.abi_version = SA_KERNEL_ABI_VERSION;
  k.struct_size = sizeof(sa_kernel);
  k.name = "spy";
  k.ops = SA_OP_SOFTMAX | SA_OP_LOG_SOFTMAX | SA_OP_LOGSUMEXP | SA_OP_ATTENTION |
          SA_OP_MERGE_ATTENTION_STATES;
  k.dtypes = SA_DTYPE_F32 | SA_DTYPE_BF16;
  k.memory = SA_MEMORY_HOST;
  k.softmax = spy_softmax;
  k.log_softmax = spy_log_softmax;
  k.logsumexp = spy_lse;
  k.attention = spy_attention;
  k.merge_attention_states = spy_merge;
  return k;
}
const sa_kernel kSpy = make_spy();

}  // namespace

TEST(Interface, EveryFreedomOfKernelHIsExercisedThroughTheGuard) {
  g_seen = {};
  const Kernel spy(&kSpy, "test");
  std::vector<gate::GuardIncident> incidents;
  gate::GuardedKernel guarded(spy, {},
                              [&](const gate::GuardIncident& i) { incidents.push_back(i); });
  props::SuiteConfig c;
  c.cases = 30;
  c.seed = 5;
  c.dtypes = {DType::float32};
  c.properties = {"interface.sizes", "differential.ulp", "metamorphic.split_kv"};
  const auto vs = props::run_suite(guarded.kernel(), c);
  for (const auto& v : vs)
    EXPECT_TRUE(v.outcome == Outcome::pass || v.outcome == Outcome::skip) << describe(v);
  EXPECT_TRUE(incidents.empty()) << incidents.front().detail;
  // The guard hands the kernel one mapping for aliased arguments: the spy sees them aliased.
  EXPECT_TRUE(g_seen.in_place);
  EXPECT_TRUE(g_seen.merge_aliased);
  EXPECT_TRUE(g_seen.out_stride_differs);
  EXPECT_TRUE(g_seen.in_stride_not_n);
  EXPECT_TRUE(g_seen.out_not_n);
  EXPECT_TRUE(g_seen.several_rows);
  EXPECT_TRUE(g_seen.attention_strides_distinct);
  EXPECT_EQ(g_seen.max_n, 65537);
  bool sized = false;
  for (const auto& v : vs)
    if (v.property == "interface.sizes" && v.op == "softmax") {
      sized = true;
      EXPECT_NE(v.note.find("2^16"), std::string::npos) << v.note;
    }
  EXPECT_TRUE(sized);
}

TEST(Interface, SizesCoverEveryPowerOfTwoAndItsNeighbours) {
  const Kernel spy(&kSpy, "test");
  props::SuiteConfig c;
  c.seed = 9;
  c.dtypes = {DType::float32};
  c.ops = {Op::softmax};
  c.properties = {"interface.sizes"};
  c.max_log2_n = 12;
  g_seen = {};
  props::run_suite(spy, c);
  for (int k = 0; k <= 12; ++k)
    for (std::int64_t d : {-1, 0, 1})
      if ((std::int64_t{1} << k) + d >= 1)
        EXPECT_TRUE(g_seen.sizes.count((std::int64_t{1} << k) + d)) << k << " " << d;
  EXPECT_EQ(g_seen.max_n, 4097);
  c.max_log2_n = 31;
  EXPECT_THROW(props::run_suite(spy, c), std::invalid_argument);
}

TEST(VerdictText, ErrorAgainstAnExactZeroIsAbsolute) {
  const props::detail::Check c =
      props::detail::elem(DType::float32, 1.4e-6, 0.0, 0.0, "row 0 item 3");
  EXPECT_TRUE(c.fails());
  EXPECT_DOUBLE_EQ(c.measured, 1.4e-6);  // not 1e39 "ulps"
  EXPECT_EQ(c.unit, "absolute");
  EXPECT_NE(c.where.find("absolute error"), std::string::npos);
}

TEST(VerdictText, SpecialValuesNamesTheFiniteNeighbourRow) {
  g_seen = {};
  g_seen.corrupt_row0_of_two = true;
  const Kernel spy(&kSpy, "test");
  props::SuiteConfig c;
  c.seed = 3;
  c.dtypes = {DType::float32};
  c.ops = {Op::softmax};
  c.properties = {"special.values"};
  const auto vs = props::run_suite(spy, c);
  g_seen.corrupt_row0_of_two = false;
  ASSERT_EQ(vs.size(), 1u);
  ASSERT_EQ(vs[0].outcome, Outcome::fail) << describe(vs[0]);
  EXPECT_NE(vs[0].counterexample.find("finite row 0"), std::string::npos) << vs[0].counterexample;
  EXPECT_NE(vs[0].counterexample.find("neighbour of row 1"), std::string::npos);
}

TEST(VerdictText, SpecTemperatureRestrictsTheta) {
  const Kernel spy(&kSpy, "test");
  props::SuiteConfig c;
  c.seed = 4;
  c.cases = 20;
  c.dtypes = {DType::float32};
  c.ops = {Op::softmax};
  c.properties = {"differential.ulp"};
  c.temperature = 2.0;
  g_seen = {};
  props::run_suite(spy, c);
  EXPECT_GT(g_seen.temperatures.size(), 1u);  // without the restriction: 2, 1, 0.5, 3
  c.temperature_only = true;
  g_seen = {};
  props::run_suite(spy, c);
  EXPECT_EQ(g_seen.temperatures, std::set<double>{2.0});
}

TEST(VerdictText, APassCarriesItsWorstInput) {
  const Kernel spy(&kSpy, "test");
  props::SuiteConfig c;
  c.seed = 4;
  c.cases = 10;
  c.dtypes = {DType::float32};
  c.ops = {Op::softmax};
  c.properties = {"differential.ulp", "special.values", "interface.sizes"};
  c.max_log2_n = 8;
  for (const auto& v : props::run_suite(spy, c)) {
    ASSERT_EQ(v.outcome, Outcome::pass) << describe(v);
    EXPECT_FALSE(v.worst_case.empty()) << describe(v);
    EXPECT_NE(describe(v).find("worst case:"), std::string::npos);
  }
}

TEST(VerdictText, SummaryOfAVerdictWithoutNumbers) {
  gate::RunRecord r;
  r.kernel = "k";
  Verdict v;
  v.property = "gate.no_crash";
  v.outcome = Outcome::fail;
  v.rule = {"gate", ""};
  r.verdicts = {v};
  std::ostringstream os;
  gate::write_summary(os, r, false);
  EXPECT_EQ(os.str().find("nan"), std::string::npos) << os.str();
  EXPECT_NE(os.str().find("no measurement"), std::string::npos) << os.str();
}

// A case retried after a crash or hang counts past the total: the terminal bar
// shows 100%, never 104% (and never a bar wider than itself: that threw
// std::length_error before), and a log line likewise.
TEST(ProgressBar, NeverShowsMoreThanTheWhole) {
  for (const bool tty : {true, false}) {
    std::ostringstream os;
    {
      gate::ProgressBar bar(os, true, tty);
      EXPECT_NO_THROW(bar.update(26, 25, "special.values"));
    }
    if (tty) EXPECT_NE(os.str().find("100%"), std::string::npos) << os.str();
    EXPECT_EQ(os.str().find("104%"), std::string::npos) << os.str();
  }
}

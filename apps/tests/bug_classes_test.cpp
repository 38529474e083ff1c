// The one table of bug classes (pacts/spec/bug_classes.h) and the two mechanisms that plant them:
// every fault of the fault-injecting backend and every mutant of the kernels names a class of the
// table (by type), and every class is planted by at least one of them, so no class of the table is
// a claim nothing tests. The table of who plants what is printed (ctest -V).
#include <pacts/conformance/fault_backend.h>
#include <pacts/spec/bug_classes.h>

#include "common/mutant.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <string>
#include <vector>

namespace pacts {
namespace {

struct Planted {
  std::vector<std::string> faults, host_mutants, gpu_mutants;
  size_t count() const { return faults.size() + host_mutants.size() + gpu_mutants.size(); }
};

std::array<Planted, spec::kBugClassCount> who_plants_what() {
  std::array<Planted, spec::kBugClassCount> p;
  for (conformance::Fault f : conformance::all_faults())
    p[static_cast<size_t>(conformance::fault_bug_class(f))].faults.push_back(conformance::fault_name(f));
  for (const kernels::common::MutantInfo& m : kernels::common::kMutants)
    (m.gpu_only ? p[static_cast<size_t>(m.bug_class)].gpu_mutants
                : p[static_cast<size_t>(m.bug_class)].host_mutants)
        .push_back(m.name);
  return p;
}

// The classes nothing plants.
template <size_t N>
std::vector<std::string> unplanted(const std::array<Planted, N>& p) {
  std::vector<std::string> out;
  for (size_t c = 0; c < N; ++c)
    if (p[c].count() == 0) out.push_back(spec::kBugClasses[c].name);
  return out;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s.empty() ? "-" : s;
}

TEST(BugClasses, TheTableIsInOrderAndNamed) {
  for (int c = 0; c < spec::kBugClassCount; ++c) {
    EXPECT_EQ(static_cast<int>(spec::kBugClasses[c].id), c);
    EXPECT_NE(std::string(spec::kBugClasses[c].clause).find("spec/"), std::string::npos);
    EXPECT_GT(std::string(spec::kBugClasses[c].what).size(), 20u);
  }
}

TEST(BugClasses, EveryClassIsPlanted) {
  const auto p = who_plants_what();
  std::printf("| bug class | faults | host mutants | GPU mutants |\n| --- | --- | --- | --- |\n");
  for (int c = 0; c < spec::kBugClassCount; ++c)
    std::printf("| %s | %s | %s | %s |\n", spec::kBugClasses[c].name, joined(p[c].faults).c_str(),
                joined(p[c].host_mutants).c_str(), joined(p[c].gpu_mutants).c_str());
  EXPECT_EQ(joined(unplanted(p)), "-");
  size_t faults = 0, mutants = 0;
  for (const Planted& x : p) faults += x.faults.size(), mutants += x.host_mutants.size() + x.gpu_mutants.size();
  EXPECT_EQ(faults, conformance::all_faults().size());
  EXPECT_EQ(mutants, static_cast<size_t>(kernels::common::kMutantCount));
}

// Planted: a class whose only fault and mutants are taken away is reported as unplanted.
TEST(BugClasses, AnUnplantedClassIsSeen) {
  auto p = who_plants_what();
  const size_t c = static_cast<size_t>(spec::BugClass::plan_dependence);
  ASSERT_GT(p[c].count(), 0u);
  p[c] = {};
  EXPECT_EQ(joined(unplanted(p)), "plan_dependence");
}

}  // namespace
}  // namespace pacts

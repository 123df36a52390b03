// Slurm's compressed node and task lists, and a job described by srun's
// environment.
#include <gtest/gtest.h>
#include <horovod/job_info.h>
#include <stdlib.h>

#include <string>
#include <vector>

#include "rendezvous/slurm_lists.h"

namespace horovod {
namespace {

std::vector<std::string> Nodes(const std::string& list) {
  std::vector<std::string> out;
  Status st = ExpandSlurmNodeList(list, &out);
  EXPECT_TRUE(st.ok()) << list << ": " << st.message();
  return out;
}

std::vector<int> Tasks(const std::string& list) {
  std::vector<int> out;
  Status st = ExpandSlurmTasksPerNode(list, &out);
  EXPECT_TRUE(st.ok()) << list << ": " << st.message();
  return out;
}

TEST(SlurmLists, NodeListsExpandInOrder) {
  using V = std::vector<std::string>;
  EXPECT_EQ(Nodes("host1"), V({"host1"}));
  EXPECT_EQ(Nodes("hvd-h[1-2]"), V({"hvd-h1", "hvd-h2"}));
  EXPECT_EQ(Nodes("gpu[01-03,07],login5"),
            V({"gpu01", "gpu02", "gpu03", "gpu07", "login5"}));
  EXPECT_EQ(Nodes("rack[1-2]-n[8-9]"),
            V({"rack1-n8", "rack1-n9", "rack2-n8", "rack2-n9"}));
  EXPECT_EQ(Nodes("a[9-11]"), V({"a9", "a10", "a11"}));
}

TEST(SlurmLists, TaskListsExpandTheirRepeats) {
  using V = std::vector<int>;
  EXPECT_EQ(Tasks("2(x2)"), V({2, 2}));
  EXPECT_EQ(Tasks("3(x2),1"), V({3, 3, 1}));
  EXPECT_EQ(Tasks("4"), V({4}));
}

TEST(SlurmLists, MalformedListsAreRefusedNamingThem) {
  std::vector<std::string> nodes;
  std::vector<int> tasks;
  for (const char* bad : {"", "a[1-", "a[3-1]", "a[x]", "a]", "a[1-2],"}) {
    Status st = ExpandSlurmNodeList(bad, &nodes);
    EXPECT_FALSE(st.ok()) << bad;
    EXPECT_NE(st.message().find("'" + std::string(bad) + "'"),
              std::string::npos)
        << st.message();
  }
  for (const char* bad : {"", "2(x)", "2(2)", "x", "2(x0)", "2(x3"})
    EXPECT_FALSE(ExpandSlurmTasksPerNode(bad, &tasks).ok()) << bad;
  // A bound on what a list may expand to.
  EXPECT_FALSE(ExpandSlurmNodeList("n[0-999999]", &nodes).ok());
  EXPECT_FALSE(ExpandSlurmTasksPerNode("1(x999999)", &tasks).ok());
}

// Sets srun's variables for one task, and clears them afterwards.
class SrunTask : public ::testing::Test {
 protected:
  void Set(const char* name, const std::string& value) {
    setenv(name, value.c_str(), 1);
    names_.push_back(name);
  }
  void TearDown() override {
    for (const char* n : names_) unsetenv(n);
  }
  void Task(int rank, int node, int local) {
    Set("SLURM_PROCID", std::to_string(rank));
    Set("SLURM_NODEID", std::to_string(node));
    Set("SLURM_LOCALID", std::to_string(local));
    Set("SLURM_STEP_ID", "0");
    Set("SLURM_JOB_ID", "4242");
  }
  std::vector<const char*> names_;
};

TEST_F(SrunTask, UnevenNodesGiveThePlacementAndRank0sNode) {
  Task(3, 1, 0);
  Set("SLURM_STEP_NUM_TASKS", "4");
  Set("SLURM_STEP_NODELIST", "node[7-8]");
  Set("SLURM_STEP_TASKS_PER_NODE", "3,1");
  Set("HOROVOD_SECRET_KEY", "k");
  JobInfo j;
  Status st = JobInfo::FromEnvironment(&j);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(j.rank, 3);
  EXPECT_EQ(j.size, 4);
  EXPECT_EQ(j.local_rank, 0);
  EXPECT_EQ(j.local_size, 1);
  EXPECT_EQ(j.cross_rank, 1);
  EXPECT_EQ(j.cross_size, 2);
  EXPECT_EQ(j.controller_addr, "node7");
  EXPECT_GE(j.controller_port, 20000);
  EXPECT_LT(j.controller_port, 40000);
  EXPECT_FALSE(j.rendezvous_pmix);
}

TEST_F(SrunTask, SeveralNodesWithoutPmixNeedTheUsersSecret) {
  Task(0, 0, 0);
  Set("SLURM_NTASKS", "4");
  Set("SLURM_JOB_NODELIST", "n[1-2]");
  Set("SLURM_TASKS_PER_NODE", "2(x2)");
  JobInfo j;
  Status st = JobInfo::FromEnvironment(&j);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("HOROVOD_SECRET_KEY"), std::string::npos)
      << st.message();
}

TEST_F(SrunTask, OneNodeMeetsThroughAPrivateFile) {
  Task(1, 0, 1);
  Set("SLURM_STEP_NUM_TASKS", "2");
  Set("SLURM_STEP_NODELIST", "solo");
  Set("SLURM_STEP_TASKS_PER_NODE", "2");
  JobInfo j;
  Status st = JobInfo::FromEnvironment(&j);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(j.local_size, 2);
  EXPECT_EQ(j.controller_port, 0);
  EXPECT_FALSE(j.rendezvous_file.empty());
}

TEST_F(SrunTask, ListsThatDisagreeAreNamed) {
  Task(0, 0, 0);
  Set("SLURM_STEP_NUM_TASKS", "5");
  Set("SLURM_STEP_NODELIST", "n[1-2]");
  Set("SLURM_STEP_TASKS_PER_NODE", "2(x2)");
  JobInfo j;
  Status st = JobInfo::FromEnvironment(&j);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("add up to 4, not the step's 5"),
            std::string::npos)
      << st.message();
}

TEST_F(SrunTask, ABatchScriptIsNotATask) {
  // sbatch's script sees SLURM_PROCID but no step: a plain single process.
  Set("SLURM_PROCID", "0");
  Set("SLURM_NTASKS", "4");
  JobInfo j;
  ASSERT_TRUE(JobInfo::FromEnvironment(&j).ok());
  EXPECT_EQ(j.size, 1);
}

}  // namespace
}  // namespace horovod

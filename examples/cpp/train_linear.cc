// Trains y = 3x - 2 with a hand-written linear model, data split across
// ranks, gradients averaged with the engine's allreduce. Launch with
//   horovodrun -np 2 build/tests/train_linear
#include <horovod/engine.h>

#include <cmath>
#include <cstdio>
#include <random>

int main() {
  horovod::JobInfo job;
  horovod::Status st = horovod::JobInfo::FromEnvironment(&job);
  std::unique_ptr<horovod::Engine> engine;
  if (st.ok()) st = horovod::Engine::Start(job, &engine);
  if (!st.ok()) {
    std::fprintf(stderr, "init failed: %s\n", st.ToString().c_str());
    return 1;
  }
  const int rank = engine->rank(), size = engine->size();
  std::mt19937 rng(1234 + rank);  // each rank holds its own shard of data
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> xs(256), ys(256);
  for (size_t i = 0; i < xs.size(); ++i) {
    xs[i] = u(rng);
    ys[i] = 3 * xs[i] - 2 + 0.01 * u(rng);
  }
  double params[2] = {0, 0};  // w, b: identical start on every rank
  for (int step = 0; step < 200; ++step) {
    double grad[2] = {0, 0};
    for (size_t i = 0; i < xs.size(); ++i) {
      double err = params[0] * xs[i] + params[1] - ys[i];
      grad[0] += 2 * err * xs[i] / xs.size();
      grad[1] += 2 * err / xs.size();
    }
    horovod::TensorView g{grad, horovod::DataType::kFloat64, {2}};
    horovod::CollectiveArgs args;
    args.name = "grad";
    args.op = horovod::ReduceOp::kAverage;
    horovod::Handle h;
    st = engine->Allreduce(g, args, &h);
    if (st.ok()) st = h.Wait();
    if (!st.ok()) {
      std::fprintf(stderr, "rank %d: %s\n", rank, st.ToString().c_str());
      return 1;
    }
    params[0] -= 0.1 * grad[0];
    params[1] -= 0.1 * grad[1];
  }
  if (rank == 0)
    std::printf("trained on %d ranks: w=%.3f b=%.3f\n", size, params[0],
                params[1]);
  bool ok = std::fabs(params[0] - 3) < 0.05 && std::fabs(params[1] + 2) < 0.05;
  engine->Shutdown();
  return ok ? 0 : 2;
}

"""What each rank of a TorchEstimator's fit runs: read its share of the
data from the store, train with hvd.DistributedOptimizer, and on rank 0
write a checkpoint and the history after every epoch. Every rank takes
the same number of batches per epoch (its share cut to the smallest
share), so no rank waits in a collective the others never reach."""

import json
import os


def _tensors(columns, torch):
    out = []
    for a in columns:
        t = torch.from_numpy(a)
        out.append(t.float() if t.is_floating_point() else t)
    return out


def _labels(columns, torch):
    out = []
    for a in columns:
        t = torch.from_numpy(a)
        out.append(t.float() if t.is_floating_point() else t.long())
    return out


def _loss(spec, loss, outputs, labels):
    if len(labels) == 1 and not isinstance(outputs, (list, tuple)):
        return loss(outputs, labels[0])
    losses = loss if isinstance(loss, (list, tuple)) else [loss] * len(labels)
    weights = spec["loss_weights"] or [1.0] * len(labels)
    return sum(w * f(o, y) for w, f, o, y in zip(weights, losses, outputs,
                                                  labels))


def train(spec):
    import cloudpickle
    import numpy as np
    import torch

    import horovod.torch as hvd
    from horovod.spark.common.shard import read_even_shard

    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    torch.set_num_threads(1)
    if spec["seed"] is not None:
        torch.manual_seed(spec["seed"])
    model, optimizer, loss = cloudpickle.loads(spec["model"])
    features, labels = spec["feature_cols"], spec["label_cols"]

    def load(path):
        if path is None:
            return None
        data, rows = read_even_shard(path, features + labels, rank, size)
        return ([_tensors([data[c] for c in features], torch),
                 _labels([data[c] for c in labels], torch)], rows)

    train_data, rows = load(spec["train_path"])
    val = load(spec["val_path"])
    optimizer = hvd.DistributedOptimizer(
        optimizer, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    rng = np.random.default_rng(
        None if spec["seed"] is None else spec["seed"] + rank)
    batch = spec["batch_size"]
    history = {"loss": []}
    if val is not None:
        history["val_loss"] = []
    for epoch in range(spec["epochs"]):
        model.train()
        order = rng.permutation(rows) if spec["shuffle"] else np.arange(rows)
        total = 0.0
        for start in range(0, rows, batch):
            idx = torch.from_numpy(order[start:start + batch])
            optimizer.zero_grad()
            step_loss = _loss(spec, loss,
                              model(*[x[idx] for x in train_data[0]]),
                              [y[idx] for y in train_data[1]])
            step_loss.backward()
            optimizer.step()
            total += step_loss.item() * len(idx)
        history["loss"].append(hvd.allreduce(
            torch.tensor(total / rows), name="estimator.loss").item())
        if val is not None:
            model.eval()
            (vx, vy), vrows = val
            with torch.no_grad():
                vloss = sum(_loss(spec, loss,
                                  model(*[x[s:s + spec["val_batch_size"]]
                                          for x in vx]),
                                  [y[s:s + spec["val_batch_size"]]
                                   for y in vy]).item() *
                            len(vx[0][s:s + spec["val_batch_size"]])
                            for s in range(0, vrows, spec["val_batch_size"]))
            history["val_loss"].append(hvd.allreduce(
                torch.tensor(vloss / max(vrows, 1)),
                name="estimator.val_loss").item())
        if rank == 0:
            _save(spec, model, history, torch)
            if spec["verbose"]:
                print("epoch %d/%d: %s" % (
                    epoch + 1, spec["epochs"],
                    ", ".join("%s %.4f" % (k, v[-1])
                              for k, v in history.items())), flush=True)
    hvd.shutdown()
    return history


def _save(spec, model, history, torch):
    os.makedirs(os.path.dirname(spec["checkpoint"]), exist_ok=True)
    partial = spec["checkpoint"] + ".partial"
    torch.save(model.state_dict(), partial)
    os.replace(partial, spec["checkpoint"])
    os.makedirs(spec["logs"], exist_ok=True)
    with open(os.path.join(spec["logs"], "history.json"), "w") as f:
        json.dump(history, f)

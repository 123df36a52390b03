"""horovod.torch.elastic's worker side at a fixed set of ranks (run by
checks.py, one pytest case per check): TorchState's commit, restore and
sync, ElasticSampler's split and resumption, and the retry loop `run`
around a collective that fails on every rank."""

import torch

import horovod.torch as hvd

hvd.init()
r, n = hvd.rank(), hvd.size()


def model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh(),
                               torch.nn.Linear(3, 1))


def flat(m):
    return torch.cat([p.detach().flatten() for p in m.parameters()])


def step(m, opt):
    opt.zero_grad()
    m(torch.ones(2, 4)).sum().backward()
    opt.step()


def check_sync_makes_every_rank_rank_0s():
    m = model(seed=r)  # a different model on every rank
    opt = torch.optim.Adam(m.parameters(), lr=0.1)
    step(m, opt)
    state = hvd.elastic.TorchState(m, opt, epoch=10 + r, note={"rank": r})
    state.sync()
    ref = hvd.broadcast_object((flat(m), opt.state_dict()), root_rank=0)
    assert torch.equal(flat(state.model), ref[0])
    assert state.epoch == 10 and state.note == {"rank": 0}
    mine = state.optimizer.state_dict()["state"]
    for k, v in ref[1]["state"].items():
        assert torch.equal(mine[k]["exp_avg"], v["exp_avg"]), k
        assert int(mine[k]["step"]) == int(v["step"]), k
    # What sync brought is also what restore goes back to.
    step(m, opt)
    state.epoch = 99
    state.restore()
    assert torch.equal(flat(state.model), ref[0]) and state.epoch == 10


def check_restore_returns_to_the_last_commit():
    m = model(seed=1)
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    state = hvd.elastic.TorchState(m, opt, batch=0, seen=[])
    step(m, opt)
    state.batch, state.seen = 5, [1, 2]
    state.commit()
    committed = flat(m).clone()
    buf = opt.state_dict()["state"][0]["momentum_buffer"].clone()
    step(m, opt)
    step(m, opt)
    state.batch = 9
    state.seen.append(3)
    assert not torch.equal(flat(m), committed)
    state.restore()
    assert torch.equal(flat(state.model), committed)
    assert torch.equal(opt.state_dict()["state"][0]["momentum_buffer"], buf)
    assert state.batch == 5 and state.seen == [1, 2]
    # The restored value is a copy: changing it leaves the commit intact.
    state.seen.append(4)
    state.restore()
    assert state.seen == [1, 2]


def check_a_new_model_assigned_to_the_state_is_what_it_saves():
    state = hvd.elastic.TorchState(model(seed=1), batch=0)
    other = model(seed=2)
    state.model = other
    state.commit()
    with torch.no_grad():
        for p in other.parameters():
            p.add_(1.0)
    state.restore()
    assert torch.equal(flat(state.model), flat(model(seed=2)))
    try:
        state.model = "not a module"
    except ValueError as e:
        assert "must stay a Sequential" in str(e), e
    else:
        raise AssertionError("a string replaced the model")


def check_sampler_splits_an_epoch_and_resumes_what_is_left():
    data = list(range(23))
    s = hvd.elastic.ElasticSampler(data, shuffle=True, seed=7)
    s.set_epoch(3)
    mine = list(s)
    everyone = hvd.allgather_object(mine)
    assert len(s) == len(mine) == -(-23 // n)
    # Every sample once (the padding repeats the first ones).
    assert set(sum(everyone, [])) == set(data)
    assert len(sum(everyone, [])) == len(s) * n
    # The shuffle depends on the seed and the epoch only.
    again = hvd.elastic.ElasticSampler(data, shuffle=True, seed=7)
    again.set_epoch(3)
    assert list(again) == mine
    # Two batches of 3 done on every rank; after sync the rest of the epoch
    # is split anew, without any sample a rank has processed.
    s.record_batch(0, 3)
    s.record_batch(1, 3)
    done = set(sum(hvd.allgather_object(mine[:6]), []))
    # Each rank knows the others' batches too, so a rank lost before the
    # sync would take none of the progress with it.
    assert s.processed_indices == done
    state = hvd.elastic.TorchState(sampler=s)
    state.sync()
    assert s.processed_indices == done
    rest = sum(hvd.allgather_object(list(s)), [])
    assert set(rest) == set(data) - done
    assert len(s) == -(-(23 - len(done)) // n)
    # The state_dict carries it: a sampler loading it resumes the same way.
    fresh = hvd.elastic.ElasticSampler(data, shuffle=True, seed=7)
    fresh.load_state_dict(s.state_dict())
    assert list(fresh) == list(s) and fresh.epoch == 3
    s.set_epoch(4)
    assert not s.processed_indices and len(s) == -(-23 // n)


def check_run_restores_reforms_and_tries_again():
    m = model(seed=3)
    opt = torch.optim.SGD(m.parameters(), lr=0.5)
    state = hvd.elastic.TorchState(m, opt, epoch=0)
    committed = flat(m).clone()
    calls, resets = [], []
    state.register_reset_callbacks([lambda: resets.append(hvd.size())])

    @hvd.elastic.run
    def train(state, scale, offset=0):
        calls.append(flat(state.model).clone())
        if len(calls) == 1:
            step(state.model, state.optimizer)
            state.epoch = 1
            # Different shapes on every rank: the allreduce fails on each
            # (HorovodInternalError), as a lost peer would make it fail.
            hvd.allreduce(torch.zeros(r + 1), name="elastic.mismatch")
        total = hvd.allreduce(torch.ones(1), op=hvd.Sum).item()
        return state.epoch, scale * total + offset

    result = train(state, 2, offset=1)
    assert result == (0, 2.0 * n + 1), result
    assert len(calls) == 2 and resets == [n]
    # The second try started from the commit, not from the failed step.
    assert torch.equal(calls[1], committed)
    assert hvd.is_initialized() and hvd.size() == n


def check_run_reforms_without_restoring_when_hosts_changed():
    state = hvd.elastic.TorchState(model(seed=5), epoch=0)
    calls = []

    @hvd.elastic.run
    def train(state):
        calls.append(state.epoch)
        if len(calls) == 1:
            state.epoch = 3
            state.commit()
            state.epoch = 4  # after the commit: the sync takes rank 0's 3
            raise hvd.elastic.HostsUpdatedInterrupt(skip_sync=False)
        if len(calls) == 2:
            state.epoch = 7  # hosts only removed: no sync, 7 stays
            raise hvd.elastic.HostsUpdatedInterrupt(skip_sync=True)
        return state.epoch

    assert train(state) == 7 and calls == [0, 3, 7], calls


def check_run_passes_other_errors_through():
    state = hvd.elastic.TorchState(model(seed=4), epoch=0)

    @hvd.elastic.run
    def train(state):
        raise KeyError("not a Horovod error")

    try:
        train(state)
    except KeyError:
        pass
    else:
        raise AssertionError("the KeyError was swallowed")
    try:
        hvd.elastic.TorchState(model(seed=4), optimizer="sgd")
    except ValueError as e:
        assert "optimizer" in str(e), e
    else:
        raise AssertionError("a string was taken as an optimizer")


def check_run_names_a_first_argument_that_is_no_state():
    @hvd.elastic.run
    def train(state, steps):
        return steps

    try:
        train(model(seed=4), 3)  # the model, not a state holding it
    except TypeError as e:
        assert "is the state it syncs and restores, a State (such as " \
            "hvd.elastic.TorchState); got Sequential" in str(e), e
    else:
        raise AssertionError("a model was taken as the state")
    assert train(hvd.elastic.TorchState(model(seed=4)), 3) == 3

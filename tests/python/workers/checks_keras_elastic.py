"""horovod.keras.elastic (and horovod.tensorflow.elastic under the
TensorFlow backend) at a fixed set of ranks (run by checks.py, one pytest
case per check and backend): KerasState's commit, restore and sync, the
state callbacks under model.fit, the retry loop, TensorFlowState."""

import os

import keras
import numpy as np

import horovod.keras as hvd

hvd.init()
r, n = hvd.rank(), hvd.size()
X = np.random.RandomState(0).randn(8, 3).astype(np.float32)
Y = np.random.RandomState(1).randn(8, 1).astype(np.float32)


def model(seed):
    keras.utils.set_random_seed(seed)
    m = keras.Sequential([keras.Input((3,)),
                          keras.layers.Dense(4, activation="tanh"),
                          keras.layers.Dense(1)])
    m.compile(optimizer=keras.optimizers.SGD(0.1, momentum=0.9), loss="mse")
    return m


def weights(m):
    return np.concatenate([np.ravel(w) for w in m.get_weights()])


def slots(opt):
    return np.concatenate([np.ravel(keras.ops.convert_to_numpy(v))
                           for v in opt.variables])


def check_sync_makes_every_rank_rank_0s():
    m = model(seed=10 + r)
    m.fit(X, Y, batch_size=4, epochs=1, verbose=0)  # builds the momentum
    state = hvd.elastic.KerasState(m, epoch=r, batch=3)
    state.sync()
    ref = hvd.broadcast_object((weights(m), slots(m.optimizer)), root_rank=0)
    assert np.array_equal(weights(m), ref[0])
    assert np.array_equal(slots(m.optimizer), ref[1])
    assert state.epoch == 0 and state.batch == 3


def check_restore_returns_to_the_last_commit():
    m = model(seed=2)
    m.fit(X, Y, batch_size=4, epochs=1, verbose=0)
    state = hvd.elastic.KerasState(m, epoch=0)
    state.epoch = 1
    state.commit()
    w, s = weights(m), slots(m.optimizer)
    m.fit(X, Y, batch_size=4, epochs=1, verbose=0)
    state.epoch = 2
    assert not np.array_equal(weights(m), w)
    state.restore()
    assert np.array_equal(weights(m), w)
    assert np.array_equal(slots(m.optimizer), s)
    assert state.epoch == 1


def check_callbacks_keep_the_state_current_and_committed():
    m = model(seed=3)
    state = hvd.elastic.KerasState(m, epoch=0, batch=0)
    commits = []
    real_commit = state.commit

    def counting_commit():
        commits.append((state.epoch, state.batch))
        real_commit()
    state.commit = counting_commit
    m.fit(X, Y, batch_size=2, epochs=2, verbose=0, callbacks=[
        hvd.elastic.UpdateBatchStateCallback(state),
        hvd.elastic.UpdateEpochStateCallback(state),
        hvd.elastic.CommitStateCallback(state, batches_per_commit=3)])
    # 4 batches per epoch: a commit after batch 3, and one at each epoch end
    # (the epoch callbacks ran first: the next epoch, batch 0).
    assert commits == [(0, 3), (1, 0), (1, 3), (2, 0)], commits
    assert state.epoch == 2 and state.batch == 0
    final = weights(m)
    m.fit(X, Y, batch_size=4, epochs=1, verbose=0)
    state.restore()
    assert np.array_equal(weights(m), final)


def check_run_restores_reforms_and_tries_again():
    m = model(seed=4)
    m.fit(X, Y, batch_size=4, epochs=1, verbose=0)
    state = hvd.elastic.KerasState(m, epoch=0)
    committed = weights(m)
    calls, resets = [], []
    state.register_reset_callbacks([lambda: resets.append(hvd.size())])

    @hvd.elastic.run
    def train(state):
        calls.append(weights(state.model))
        if len(calls) == 1:
            state.model.fit(X, Y, batch_size=4, epochs=1, verbose=0)
            state.epoch = 1
            # Different shapes on every rank: the allreduce fails on each.
            hvd.allreduce(np.zeros(r + 1, np.float32), name="elastic.bad")
        return state.epoch, float(np.asarray(hvd.allreduce(
            np.ones(1, np.float32), op=hvd.Sum))[0])

    assert train(state) == (0, float(n))
    assert len(calls) == 2 and resets == [n]
    assert np.array_equal(calls[1], committed)


def check_tensorflow_state_of_variables():
    if os.environ.get("KERAS_BACKEND", "tensorflow") != "tensorflow":
        return  # horovod.tensorflow needs the TensorFlow backend
    import tensorflow as tf
    import horovod.tensorflow as hvd_tf
    v = tf.Variable(np.full(3, float(r), np.float32))
    state = hvd_tf.elastic.TensorFlowState([v], step=r)
    state.sync()
    assert np.array_equal(v.numpy(), np.zeros(3)) and state.step == 0
    v.assign_add(np.ones(3, np.float32))
    state.commit()
    v.assign_add(np.ones(3, np.float32))
    state.step = 5
    state.restore()
    assert np.array_equal(v.numpy(), np.ones(3)) and state.step == 0
    keras_state = hvd_tf.elastic.TensorFlowKerasState(model(seed=5), epoch=2)
    assert keras_state.epoch == 2 and keras_state.optimizer is not None

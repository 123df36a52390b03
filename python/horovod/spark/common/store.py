"""Where an Estimator keeps what a fit produces: the training and
validation data it wrote as Parquet, and per run a checkpoint and logs.

Every executor and the driver must see the same paths. `LocalStore` is a
directory on a file system they share (on one machine any directory;
across machines a shared mount).

Thread-safety: a store holds only paths; concurrent fits need distinct
run ids.
"""

import os
import shutil
from urllib.parse import urlparse


class Store:
    """The layout: under `prefix_path`, `intermediate_train_data.<run>`
    and `intermediate_val_data.<run>` (Parquet folders), and
    `runs/<run>/` with `checkpoint` and `logs/`."""

    def __init__(self, prefix_path):
        self.prefix_path = prefix_path

    @staticmethod
    def create(prefix_path, *args, **kwargs):
        """The store for `prefix_path`: a local path or a file:// URL
        gives a LocalStore. Other schemes (hdfs://, s3://, ...) need a
        file system client this build does not include: ValueError."""
        scheme = urlparse(prefix_path).scheme
        if scheme in ("", "file"):
            return LocalStore(prefix_path, *args, **kwargs)
        raise ValueError("Store.create(%r): the %s:// scheme is not "
                         "supported; use a local or shared directory "
                         "(LocalStore)" % (prefix_path, scheme))

    def get_train_data_path(self, run_id):
        return self._join("intermediate_train_data." + run_id)

    def get_val_data_path(self, run_id):
        return self._join("intermediate_val_data." + run_id)

    def get_run_path(self, run_id):
        return self._join("runs", run_id)

    def get_checkpoint_path(self, run_id):
        return self._join("runs", run_id, "checkpoint")

    def get_logs_path(self, run_id):
        return self._join("runs", run_id, "logs")

    def _join(self, *parts):
        return os.path.join(self.prefix_path, *parts)


class LocalStore(Store):
    """A store in a directory (created if missing)."""

    def __init__(self, prefix_path):
        if prefix_path.startswith("file://"):
            prefix_path = urlparse(prefix_path).path
        super().__init__(os.path.abspath(prefix_path))
        os.makedirs(self.prefix_path, exist_ok=True)

    def exists(self, path):
        return os.path.exists(path)

    def read(self, path):
        with open(path, "rb") as f:
            return f.read()

    def write(self, path, data):
        """Writes `data` (bytes) to `path` whole: readers see the old file
        or the new one, never a part."""
        os.makedirs(os.path.dirname(path), exist_ok=True)
        partial = path + ".partial"
        with open(partial, "wb") as f:
            f.write(data)
        os.replace(partial, path)

    def delete(self, path):
        if os.path.isdir(path):
            shutil.rmtree(path)
        elif os.path.exists(path):
            os.remove(path)

    def to_spark_path(self, path):
        return "file://" + path

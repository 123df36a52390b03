"""One rank's share of an Estimator's Parquet data, read with pyarrow row
group by row group: rank r of n takes rows [r*N/n, (r+1)*N/n) of the N
rows of the folder's files (in name order), reading only the row groups
that overlap that range. Shares are disjoint and differ in size by at
most one row."""

import glob
import os

import numpy as np


def parquet_files(path):
    files = sorted(glob.glob(os.path.join(path, "*.parquet")))
    if not files:
        raise ValueError("no Parquet files in %s" % path)
    return files


def total_rows(path):
    import pyarrow.parquet as pq
    return sum(pq.ParquetFile(f).metadata.num_rows
               for f in parquet_files(path))


def _row_groups(path):
    """[(file, row group, first row, rows)] of the folder, and its rows."""
    import pyarrow.parquet as pq

    groups = []
    first = 0
    for f in parquet_files(path):
        meta = pq.ParquetFile(f).metadata
        for g in range(meta.num_row_groups):
            rows = meta.row_group(g).num_rows
            groups.append((f, g, first, rows))
            first += rows
    return groups, first


def read_even_shard(path, columns, rank, size):
    """read_shard's share cut to the smallest share (N // size rows), so
    every rank holds as many rows; returns (share, rows)."""
    groups, total = _row_groups(path)
    rows = total // size
    share = _read(groups, total, columns, rank, size)
    return {c: a[:rows] for c, a in share.items()}, rows


def read_shard(path, columns, rank, size):
    """{column: numpy array} of this rank's rows: scalars as a 1-D array,
    fixed-length arrays as a 2-D one."""
    groups, total = _row_groups(path)
    return _read(groups, total, columns, rank, size)


def _read(groups, first, columns, rank, size):
    import pyarrow as pa
    import pyarrow.parquet as pq

    lo, hi = rank * first // size, (rank + 1) * first // size
    tables = []
    for f, g, start, rows in groups:
        if rows == 0 or start + rows <= lo or start >= hi:
            continue
        table = pq.ParquetFile(f).read_row_group(g, columns=columns)
        begin = max(lo - start, 0)
        tables.append(table.slice(begin, min(hi - start, rows) - begin))
    if tables:
        table = pa.concat_tables(tables)
    else:
        table = pq.ParquetFile(groups[0][0]).schema_arrow.empty_table() \
            .select(columns)
    return {c: _to_numpy(c, table.column(c)) for c in columns}


def _to_numpy(name, column):
    import pyarrow as pa

    array = column.combine_chunks()
    if not pa.types.is_list(array.type) and \
            not pa.types.is_large_list(array.type):
        return _writable(array.to_numpy(zero_copy_only=False))
    lengths = np.diff(array.offsets.to_numpy())
    if len(lengths) and (lengths != lengths[0]).any():
        raise ValueError("column %r holds arrays of different lengths (%d "
                         "and %d); an Estimator needs one length per column"
                         % (name, lengths.min(), lengths.max()))
    width = int(lengths[0]) if len(lengths) else 0
    return _writable(array.flatten().to_numpy(zero_copy_only=False).reshape(
        len(array), width))


def _writable(a):
    """Frameworks refuse (or warn about) read-only buffers; Arrow's may be."""
    return a if a.flags.writeable else a.copy()

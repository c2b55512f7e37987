"""A lookup table placed on a PS process: filled and looked up there by the workers' sessions.

The table is a resource of the PS task, so a worker that built its own graph reaches the
table another worker filled when both name it alike (a vocabulary file's table is named by
the file and its columns, as in TensorFlow), and the ids a worker's lookup gives, OOV
buckets included, are those of the same graph run in-process.
"""

from __future__ import annotations

from typing import Any

import pytest

import tensorgrid as tf
from cluster_processes import LocalCluster

pytestmark = pytest.mark.timeout(180)

QUERIES = ["lake", "king", "emerson", "crimson", "palmer", ""]


def build(vocabulary: str) -> tuple[tf.Graph, dict[str, Any]]:
    graph = tf.Graph()
    with graph.as_default():
        with tf.device("/job:ps/task:0"):
            from_file = tf.lookup.index_table_from_file(vocabulary, num_oov_buckets=3)
            from_list = tf.lookup.index_table_from_tensor(["palmer", "lake"], num_oov_buckets=2)
        with tf.device("/job:worker/task:0"):
            words = tf.placeholder(tf.string, [None], name="words")
            ids_from_file = from_file.lookup(words)
            ids_from_list = from_list.lookup(words)
            file_size = from_file.size()
    return graph, {"words": words, "from_file": ids_from_file, "from_list": ids_from_list,
                   "file_size": file_size, "file_table": from_file.resource_handle,
                   "list_init": from_list.initializer}


def test_tables_on_a_ps_are_shared_by_the_workers_sessions(tmp_path: Any) -> None:
    vocabulary = tmp_path / "vocabulary.txt"
    vocabulary.write_text("emerson\nlake\npalmer\n")
    local_graph, local = build(str(vocabulary))
    with tf.Session(graph=local_graph) as session:
        session.run(local_graph.get_collection(tf.GraphKeys.TABLE_INITIALIZERS))
        want = session.run([local["from_file"], local["from_list"]], {local["words"]: QUERIES})

    with LocalCluster(tmp_path, {"ps": 1, "worker": 2}) as cluster:
        graph0, t0 = build(str(vocabulary))
        table_ops = [op for op in graph0.get_operations()
                     if op.type.startswith(("HashTable", "LookupTable", "InitializeTable"))]
        assert {op.type for op in table_ops} == {"HashTableV2", "InitializeTableFromTextFileV2", "LookupTableImportV2",
                                                 "LookupTableFindV2", "LookupTableSizeV2"}
        assert {op.device for op in table_ops} == {"/job:ps/task:0"}  # colocated with their table
        assert t0["from_list"].device == "/job:worker/task:0"  # the OOV buckets are hashed on the worker
        with tf.Session(cluster.target("worker", 0), graph=graph0) as worker0:
            with pytest.raises(tf.errors.FailedPreconditionError, match="Table not initialized"):
                worker0.run(t0["from_file"], {t0["words"]: QUERIES})
            worker0.run(graph0.get_collection(tf.GraphKeys.TABLE_INITIALIZERS))
            got = worker0.run([t0["from_file"], t0["from_list"]], {t0["words"]: QUERIES})
        assert [g.tolist() for g in got] == [w.tolist() for w in want]

        # Worker 1 builds its own graph and initializes nothing: the file's table on the PS is
        # the one worker 0 filled; its own table from a list is another (a unique name), empty.
        graph1, t1 = build(str(vocabulary))
        with tf.Session(cluster.target("worker", 1), graph=graph1) as worker1:
            assert worker1.run(t1["file_size"]) == 3 + 3
            assert worker1.run(t1["from_file"], {t1["words"]: QUERIES}).tolist() == want[0].tolist()
            with pytest.raises(tf.errors.FailedPreconditionError, match="Table not initialized"):
                worker1.run(t1["from_list"], {t1["words"]: QUERIES})
            worker1.run(t1["list_init"])
            assert worker1.run(t1["from_list"], {t1["words"]: QUERIES}).tolist() == want[1].tolist()

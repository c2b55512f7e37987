"""ClusterSpec and TF_CONFIG parsing: the layout every task starts from."""

import json

import pytest

import tensorgrid as tf
from tensorgrid.distributed import cluster as cluster_lib


def test_dense_and_sparse_jobs():
    spec = tf.train.ClusterSpec({"ps": ["ps0:2222", "ps1:2222"], "worker": {1: "w1:2222", 3: "w3:2222"}})
    assert spec.jobs == ["ps", "worker"]
    assert spec.num_tasks("ps") == 2
    assert spec.task_indices("worker") == [1, 3]
    assert spec.task_address("worker", 3) == "w3:2222"
    assert spec.job_tasks("worker") == [None, "w1:2222", None, "w3:2222"]
    assert spec.as_dict() == {"ps": ["ps0:2222", "ps1:2222"], "worker": {1: "w1:2222", 3: "w3:2222"}}
    assert tf.train.ClusterSpec(spec) == spec


@pytest.mark.parametrize("bad, message", [
    ({"ps": [5]}, "must be a 'host:port' string"),
    ({"p s": ["h:1"]}, "Invalid job name"),
    ({"ps": {"x": "h:1"}}, "not an integer"),
    ({"ps": "h:1"}, "must be a list or dict"),
])
def test_bad_cluster_is_rejected_with_the_bad_value(bad, message):
    with pytest.raises((ValueError, TypeError), match=message):
        tf.train.ClusterSpec(bad)


@pytest.mark.parametrize("address, message", [("nohost", "host:port"), ("h:99999", "0..65535")])
def test_an_address_without_a_valid_port_is_kept_by_the_spec_and_refused_by_a_server(address, message):
    """As TensorFlow: ClusterSpec keeps any string; a Server (and TF_CONFIG) checks every address."""
    spec = tf.train.ClusterSpec({"ps": [address], "worker": ["localhost:0"]})
    assert spec.task_address("ps", 0) == address
    with pytest.raises(tf.errors.InvalidArgumentError, match=f"{address}.*/job:ps/task:0.*{message}"):
        tf.train.Server(spec, job_name="worker", task_index=0, start=False)
    with pytest.raises(ValueError, match=f"/job:ps/task:0.*{message}"):
        cluster_lib.TFConfig.parse(json.dumps({"cluster": spec.as_dict(), "task": {"type": "worker", "index": 0}}))


def test_unknown_task_names_the_valid_ones():
    spec = tf.train.ClusterSpec({"ps": ["a:1"]})
    with pytest.raises(ValueError, match=r"No task with index 3 in job 'ps'; its tasks are \[0\]"):
        spec.task_address("ps", 3)
    with pytest.raises(ValueError, match="No such job in cluster: 'chief'"):
        spec.num_tasks("chief")


def test_tf_config_resolver(monkeypatch):
    config = {"cluster": {"chief": ["c:1"], "ps": ["p:1"], "worker": ["w0:1", "w1:1"]},
              "task": {"type": "worker", "index": 1}, "environment": "cloud"}
    monkeypatch.setenv("TF_CONFIG", json.dumps(config))
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    assert resolver.cluster_spec().as_dict() == config["cluster"]
    assert (resolver.task_type, resolver.task_id) == ("worker", 1)
    assert resolver.rpc_layer is None  # as TensorFlow's: unset unless given (or in TF_CONFIG)
    assert resolver.master() == "w1:1"
    assert resolver.master("ps", 0, rpc_layer="grpc") == "grpc://p:1"
    assert tf.distribute.cluster_resolver.TFConfigClusterResolver(rpc_layer="grpc").master() == "grpc://w1:1"
    monkeypatch.setenv("TF_CONFIG", json.dumps({**config, "rpc_layer": "grpc"}))
    assert resolver.rpc_layer == "grpc" and resolver.master() == "grpc://w1:1"
    assert cluster_lib.chief_task(resolver.cluster_spec()) == ("chief", 0)


@pytest.mark.parametrize("text, message", [
    ("{not json", "not valid JSON"),
    ('{"cluster": {"ps": ["p:1"]}, "task": {"type": "worker", "index": 0}}', "not a job of the cluster"),
    ('{"cluster": {"ps": ["p:1"]}, "task": {"type": "ps", "index": 4}}', "No task with index 4"),
    ('{"cluster": {"ps": ["p:1"]}, "task": {"type": "ps", "index": "x"}}', "must be an integer"),
])
def test_bad_tf_config(text, message):
    with pytest.raises(ValueError, match=message):
        cluster_lib.TFConfig.parse(text)


def test_chief_is_worker_zero_without_a_chief_job():
    assert cluster_lib.chief_task(tf.train.ClusterSpec({"ps": ["p:1"], "worker": ["w:1"]})) == ("worker", 0)

"""``tf.train``: optimizers, the global step, checkpoints, and distributed training helpers."""

from __future__ import annotations

from tensorgrid.train.adadelta import AdadeltaOptimizer
from tensorgrid.train.adagrad import AdagradOptimizer
from tensorgrid.train.adam import AdamOptimizer
from tensorgrid.train.checkpoint_chain import CheckpointReader
from tensorgrid.train.checkpoint_conversion import convert_checkpoint
from tensorgrid.train.checkpoint_utils import init_from_checkpoint
from tensorgrid.train.checkpoint_management import (
    CheckpointState, NewCheckpointReader, checkpoint_exists, get_checkpoint_mtimes, get_checkpoint_state,
    latest_checkpoint, list_variables, load_checkpoint, load_variable, remove_checkpoint, update_checkpoint_state,
)
from tensorgrid.train.ftrl import FtrlOptimizer
from tensorgrid.train.gradient_descent import GradientDescentOptimizer
from tensorgrid.train.meta_graph import MetaGraphDef, export_meta_graph, import_meta_graph
from tensorgrid.train.learning_rate_decay import (
    exponential_decay, inverse_time_decay, natural_exp_decay, piecewise_constant, polynomial_decay,
)
from tensorgrid.train.momentum import MomentumOptimizer
from tensorgrid.train.optimizer import Optimizer
from tensorgrid.train.proximal_adagrad import ProximalAdagradOptimizer
from tensorgrid.train.proximal_gradient_descent import ProximalGradientDescentOptimizer
from tensorgrid.train.rmsprop import RMSPropOptimizer
from tensorgrid.train.saver import IncrementalSaver, Saver
from tensorgrid.train.training_util import (
    assert_global_step, create_global_step, get_global_step, get_or_create_global_step, global_step,
)

# Distributed training: placement, servers, synchronous replicas, monitored sessions.
from tensorgrid.distributed.cluster import ClusterSpec
from tensorgrid.distributed.rpc.server import Server
from tensorgrid.v1.cluster_pb2 import ClusterDef, JobDef, ServerDef
from tensorgrid.train.basic_session_run_hooks import (
    CheckpointSaverHook, CheckpointSaverListener, FeedFnHook, FinalOpsHook, GlobalStepWaiterHook, LoggingTensorHook,
    NanLossDuringTrainingError, NanTensorHook, SecondOrStepTimer, StepCounterHook, StopAtStepHook, SummarySaverHook,
)
from tensorgrid.train.coordinator import Coordinator, LooperThread
from tensorgrid.train.device_setter import GreedyLoadBalancingStrategy, byte_size_load_fn, replica_device_setter
from tensorgrid.train.monitored_session import (
    ChiefSessionCreator, MonitoredSession, MonitoredTrainingSession, Scaffold, SessionCreator,
    SingularMonitoredSession, WorkerSessionCreator,
)
from tensorgrid.train.queue_runner import QueueRunner, add_queue_runner, start_queue_runners
from tensorgrid.train.input import (
    batch, batch_join, input_producer, limit_epochs, range_input_producer, shuffle_batch, shuffle_batch_join,
    slice_input_producer, string_input_producer,
)
from tensorgrid.train.session_manager import SessionManager
from tensorgrid.train.supervisor import Supervisor
from tensorgrid.train.session_run_hook import SessionRunArgs, SessionRunContext, SessionRunHook, SessionRunValues
from tensorgrid.train.sync_replicas_optimizer import SyncReplicasOptimizer
from tensorgrid.train.vocab_remapping import VocabInfo
from tensorgrid.train.warm_starting_util import warm_start

# The records of input files: tf.train.Example and its parts (TensorFlow's field numbers).
from tensorgrid.v1.example_pb2 import (
    BytesList, Example, Feature, FeatureList, FeatureLists, Features, FloatList, Int64List, SequenceExample,
)

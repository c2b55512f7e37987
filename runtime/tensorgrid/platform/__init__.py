"""The process helpers TF1 programs call around their graphs, where TensorFlow keeps them
(``tensorflow/python/platform``): command-line flags and ``tf.app.run`` (``flags``, ``app``),
``tf.logging`` (``tf_logging``) and file access (``gfile``).

They are plain Python and know nothing of graphs: the package imports only the standard
library and ``framework.errors`` (for the error classes TensorFlow raises), so any layer may
use it and it sits beside the runtime layers, not in them (docs/architecture.md).
"""

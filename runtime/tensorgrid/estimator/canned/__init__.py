"""TF1's canned estimators (``LinearClassifier``/``Regressor``, ``DNNClassifier``/``Regressor``,
``DNNLinearCombinedClassifier``/``Regressor``) and their heads, over ``tf.estimator.Estimator``."""

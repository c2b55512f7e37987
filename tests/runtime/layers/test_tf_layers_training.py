"""A ``tf.layers`` CNN trains on the digits in one process: conv2d, batch_normalization (its
UPDATE_OPS run with the train op), max_pooling2d, flatten, dense and dropout switched by a
``training`` placeholder, with ``GradientDescentOptimizer``. The loss falls, the moving statistics
move, and inference (training false) classifies held-out digits.
"""

from __future__ import annotations

import numpy as np

import tensorgrid as tf
from tensorgrid import data


def test_a_tf_layers_cnn_trains_on_the_digits() -> None:
    digits = data.load_digits(seed=0)
    batches = data.Batches(digits.train.images, digits.train.labels, batch_size=64, seed=1)
    images = tf.placeholder(tf.float32, [None, 64])
    labels = tf.placeholder(tf.int64, [None])
    training = tf.placeholder_with_default(False, [])
    net = tf.layers.conv2d(tf.reshape(images, [-1, 8, 8, 1]), 8, 3, padding="same",
                           kernel_initializer=tf.variance_scaling_initializer(2.0, seed=1))
    net = tf.layers.batch_normalization(net, training=training)
    net = tf.layers.max_pooling2d(tf.nn.relu(net), 2, 2)
    net = tf.layers.dense(tf.layers.flatten(net), 32, activation=tf.nn.relu,
                          kernel_initializer=tf.variance_scaling_initializer(2.0, seed=2))
    net = tf.layers.dropout(net, rate=0.2, training=training, seed=3)
    logits = tf.layers.dense(net, 10, kernel_initializer=tf.glorot_uniform_initializer(seed=4))
    loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1), labels), tf.float32))
    assert len(tf.get_collection(tf.GraphKeys.UPDATE_OPS)) == 2
    with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    moving_mean = [v for v in tf.global_variables() if v.op.name == "batch_normalization/moving_mean"][0]

    losses = []
    with tf.Session() as session:
        session.run(tf.global_variables_initializer())
        for _ in range(150):
            batch_images, batch_labels = batches.next_batch()
            _, value = session.run([train_op, loss], {images: batch_images, labels: batch_labels, training: True})
            losses.append(value)
        test_accuracy, statistics = session.run([accuracy, moving_mean],
                                                {images: digits.test.images, labels: digits.test.labels})
    assert np.mean(losses[-20:]) < 0.5 * np.mean(losses[:20])
    assert np.abs(statistics).max() > 0
    assert test_accuracy > 0.8

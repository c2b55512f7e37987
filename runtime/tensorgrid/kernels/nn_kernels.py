"""Kernels of nn ops."""

from __future__ import annotations

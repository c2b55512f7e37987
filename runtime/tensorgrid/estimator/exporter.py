"""``tf.estimator.Exporter``s: what ``train_and_evaluate`` exports after each evaluation.

An ``EvalSpec``'s exporters run after every evaluation, on the checkpoint just evaluated, each into
``model_dir/export/<name>``: ``LatestExporter`` every time (keeping the newest ``exports_to_keep``
of its timestamped directories), ``FinalExporter`` only for the final checkpoint (the one at
``TrainSpec.max_steps``). ``export_results`` is what each export returned (its directory, as bytes).
"""

from __future__ import annotations

import logging
import os
import shutil
from typing import Any, Callable, Optional

log = logging.getLogger("tensorgrid.estimator")


class Exporter:
    """Exports a model after an evaluation (``tf.estimator.Exporter``); subclasses define ``export``."""

    @property
    def name(self) -> str:
        """The directory name under ``model_dir/export``."""
        raise NotImplementedError

    def export(self, estimator: Any, export_path: str, checkpoint_path: str, eval_result: dict[str, Any],
               is_the_final_export: bool) -> Any:
        """Exports ``checkpoint_path``'s model under ``export_path``; returns where (or None when it did not)."""
        raise NotImplementedError


class _SavedModelExporter(Exporter):
    def __init__(self, name: str, serving_input_receiver_fn: Callable[..., Any], assets_extra: Optional[dict[str, str]],
                 as_text: bool) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"An Exporter must have a non-empty string name, given: {name!r}")
        if not callable(serving_input_receiver_fn):
            raise ValueError(f"serving_input_receiver_fn must be callable, given: {serving_input_receiver_fn!r}")
        self._name = name
        self._serving_input_receiver_fn = serving_input_receiver_fn
        self._assets_extra = assets_extra
        self._as_text = as_text

    @property
    def name(self) -> str:
        return self._name

    def _export(self, estimator: Any, export_path: str, checkpoint_path: str) -> Any:
        return estimator.export_saved_model(export_path, self._serving_input_receiver_fn,
                                            assets_extra=self._assets_extra, as_text=self._as_text,
                                            checkpoint_path=checkpoint_path)


class FinalExporter(_SavedModelExporter):
    """Exports the final checkpoint's model only (``tf.estimator.FinalExporter``)."""

    def __init__(self, name: str, serving_input_receiver_fn: Callable[..., Any],
                 assets_extra: Optional[dict[str, str]] = None, as_text: bool = False) -> None:
        super().__init__(name, serving_input_receiver_fn, assets_extra, as_text)

    def export(self, estimator: Any, export_path: str, checkpoint_path: str, eval_result: dict[str, Any],
               is_the_final_export: bool) -> Any:
        if not is_the_final_export:
            return None
        log.info("Performing the final export in the end of training.")
        return self._export(estimator, export_path, checkpoint_path)


class LatestExporter(_SavedModelExporter):
    """Exports after every evaluation and keeps the newest ``exports_to_keep`` (None: all)
    (``tf.estimator.LatestExporter``)."""

    def __init__(self, name: str, serving_input_receiver_fn: Callable[..., Any],
                 assets_extra: Optional[dict[str, str]] = None, as_text: bool = False,
                 exports_to_keep: Optional[int] = 5) -> None:
        super().__init__(name, serving_input_receiver_fn, assets_extra, as_text)
        if exports_to_keep is not None and exports_to_keep <= 0:
            raise ValueError(f"`exports_to_keep`, if provided, must be a positive number. Got {exports_to_keep}")
        self._exports_to_keep = exports_to_keep

    def export(self, estimator: Any, export_path: str, checkpoint_path: str, eval_result: dict[str, Any],
               is_the_final_export: bool) -> Any:
        export_result = self._export(estimator, export_path, checkpoint_path)
        self._garbage_collect_exports(export_path)
        return export_result

    def _garbage_collect_exports(self, export_path: str) -> None:
        """Deletes all but the newest ``exports_to_keep`` timestamped export directories."""
        if self._exports_to_keep is None or not os.path.isdir(export_path):
            return
        exports = sorted(int(entry) for entry in os.listdir(export_path) if entry.isdigit())
        for timestamp in exports[:-self._exports_to_keep]:
            shutil.rmtree(os.path.join(export_path, str(timestamp)), ignore_errors=True)


def checked_exporters(exporters: Any) -> tuple[Exporter, ...]:
    """``EvalSpec(exporters=...)`` as a tuple: one Exporter or an iterable of them, with unique names."""
    if exporters is None:
        return ()
    if isinstance(exporters, Exporter):
        exporters = [exporters]
    try:
        checked = tuple(exporters)
    except TypeError:
        raise TypeError(f"`exporters` must be an Exporter, an iterable of Exporter, or `None`, found {exporters}.") from None
    names: set[str] = set()
    for exporter in checked:
        if not isinstance(exporter, Exporter):
            raise TypeError(f"`exporters` must be an Exporter, an iterable of Exporter, or `None`, found {exporter}.")
        if not exporter.name or not isinstance(exporter.name, str):
            raise ValueError(f"An Exporter must have a string name. Given: {type(exporter.name)}")
        if exporter.name in names:
            raise ValueError(f"`exporters` must have unique names. Such a name cannot be `None`. {exporter.name} "
                             "has been used more than once.")
        names.add(exporter.name)
    return checked


def export_all(exporters: tuple[Exporter, ...], estimator: Any, checkpoint_path: str, eval_result: dict[str, Any],
               is_the_final_export: bool) -> list[Any]:
    """Runs each exporter into ``model_dir/export/<name>``; what each returned (None where it did not export)."""
    return [exporter.export(estimator, os.path.join(estimator.model_dir, "export", exporter.name), checkpoint_path,
                            eval_result, is_the_final_export)
            for exporter in exporters]

"""``conveyor serve --worker APP --handlers MODULE``: the push consumers a server runs itself.

Code runs only where the operator put it. :class:`HandlerSources` loads what the command line names
(``conveyor.App`` objects and the functions defined in handler modules) into a registry
{script name -> handler}; :class:`Workers` runs every push consumer registered through the API whose
script name is in that registry, with the consumer's registered settings. Any other script name is
data: it is never imported, and the consumer shows as "no worker for this script".

Each target and each consumer is on its own: one that cannot load, or cannot start, is reported
once per change of its state and retried on the next refresh, and never stops the others, the
refresh thread or the server.

>>> sources = HandlerSources(apps=("myapp:app",), modules=("myapp.consumers",))
>>> workers = Workers(engine, sources)
>>> workers.start()     # refreshes every WORKER_REFRESH_SECONDS until stop()
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from conveyor.client.sync import Conveyor
from conveyor.consumer import loading
from conveyor.consumer.app import App
from conveyor.consumer.presence import WorkerPresence
from conveyor.consumer.runner import Handler
from conveyor.engine.base import Engine
from conveyor.errors import ConveyorError, QueueNotFound
from conveyor.model import ConsumerInfo, WorkerRun
from conveyor.server.accounts import AccountEngine, split

log = logging.getLogger("conveyor.server.workers")

# How often the server looks for push consumers registered (or removed) through the API, and tries
# again what could not load or start.
WORKER_REFRESH_SECONDS = 5.0
NO_WORKER = "no worker for this script"
T = TypeVar("T")


@dataclass
class Reporter:
    """Logs a subject's state only when it changes, so a problem retried every refresh is said once."""

    said: dict[str, str] = field(default_factory=dict)

    def state(self, subject: str, text: str, level: int = logging.WARNING, *, exc_info: bool = False) -> None:
        if self.said.get(subject) != text:
            self.said[subject] = text
            log.log(level, "%s: %s", subject, text, exc_info=exc_info)

    def clear(self, subject: str, text: str | None = None) -> None:
        if self.said.pop(subject, None) is not None and text:
            log.info("%s: %s", subject, text)


@dataclass
class HandlerSources:
    """The operator's command line: ``apps`` (``module:attribute`` naming a ``conveyor.App``) and
    ``modules`` (whose own public functions become handlers ``module:function``)."""

    apps: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()
    handlers: dict[str, Handler] = field(default_factory=dict)
    loaded_apps: dict[str, App] = field(default_factory=dict)
    _loaded_modules: set[str] = field(default_factory=set)
    _report: Reporter = field(default_factory=Reporter)

    @property
    def empty(self) -> bool:
        return not self.apps and not self.modules

    @property
    def pending(self) -> bool:
        return len(self.loaded_apps) < len(self.apps) or len(self._loaded_modules) < len(self.modules)

    def load(self) -> list[App]:
        """Load every target not loaded yet; returns the apps loaded by this call."""
        new: list[App] = []
        for target in self.apps:
            if target not in self.loaded_apps and (app := self._try(f"--worker {target}", loading.load_app, target)):
                self.loaded_apps[target] = app
                self.handlers.update({spec.script_name: spec.handler for spec in app.specs})
                new.append(app)
        for name in self.modules:
            if name in self._loaded_modules:
                continue
            if module := self._try(f"--handlers {name}", loading.import_operator_module, name):
                self._loaded_modules.add(name)
                found = loading.module_handlers(module)
                self.handlers.update(found)
                if not found:
                    self._report.state(f"--handlers {name}", "the module defines no public functions")
        return new

    def _try(self, subject: str, load: Callable[[str], T], target: str) -> T | None:
        try:
            loaded = load(target)
        except loading.LoadError as exc:
            self._report.state(subject, f"cannot load: {exc}; trying again every {WORKER_REFRESH_SECONDS:g} s")
            return None
        except (Exception, SystemExit) as exc:  # the module's own code failed: show its traceback, once
            self._report.state(subject, f"cannot load: importing it raised {exc!r}", exc_info=True)
            return None
        self._report.clear(subject, "loaded")
        return loaded


@dataclass
class Workers:
    """Runs the push consumers registered through the API whose script is in ``sources``' registry
    (one :class:`App` per queue, started when the consumer appears and stopped when it goes), and
    the operator's own apps. Every queue belongs to an account (embedded users' to ``local``), so a
    consumer that an embedded ``conveyor worker`` registered is wanted here too: it runs here only if
    its script is in the registry, and otherwise shows as "no worker" only while no live worker
    (``conveyor workers list``) runs it."""

    engine: Engine
    sources: HandlerSources = field(default_factory=HandlerSources)
    apps: dict[tuple[str, str], tuple[str, App]] = field(default_factory=dict)
    operator_apps: list[App] = field(default_factory=list)
    _report: Reporter = field(default_factory=Reporter)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _presence: WorkerPresence | None = None

    def start(self) -> None:
        """Load the operator's code now (in the main thread, as a module may expect), then refresh
        every WORKER_REFRESH_SECONDS in a thread; nothing here can stop a start."""
        for app in self.sources.load():
            self._start_operator_app(app)
        self._presence = WorkerPresence(self.engine, self.runs)
        self._presence.start()
        self._thread = threading.Thread(target=self._loop, name="conveyor-serve-workers", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            try:
                self.refresh()
            except Exception as exc:
                self._report.state("push consumers", f"refresh failed: {exc}", exc_info=True)
            else:
                self._report.clear("push consumers", "refreshing again")
            if self._stop.wait(WORKER_REFRESH_SECONDS):
                return

    def refresh(self) -> None:
        for app in self.sources.load() if self.sources.pending else []:
            self._start_operator_app(app)
        wanted = self._wanted()
        gone = [key for key, (cid, _) in self.apps.items() if key not in wanted or wanted[key].consumer_id != cid]
        for key in gone:
            log.info("queue %s/%s: its push consumer is gone; stopping it", *key)
            self.apps.pop(key)[1].stop()
        for key, consumer in wanted.items():
            if key not in self.apps:
                self._start_consumer(key, consumer)

    def _wanted(self) -> dict[tuple[str, str], ConsumerInfo]:
        """The push consumers of accounts' queues, except those the operator's own apps run."""
        own = {d.queue_id for app in self.operator_apps for d in app.dispatchers.values()}
        wanted: dict[tuple[str, str], ConsumerInfo] = {}
        for queue in self.engine.list_queues():
            account, name = split(queue.queue_name)
            for consumer in queue.consumers:
                if account and consumer.type == "worker" and queue.queue_id not in own:
                    wanted[(account, name)] = consumer
        return wanted

    def _start_operator_app(self, app: App) -> None:
        subject = "app " + ", ".join(spec.script_name for spec in app.specs)
        app.registers_itself = False
        try:
            app.start()
        except Exception as exc:
            self.sources.loaded_apps = {t: a for t, a in self.sources.loaded_apps.items() if a is not app}
            self._report.state(subject, f"cannot start: {exc}", exc_info=not isinstance(exc, ConveyorError))
            return
        self.operator_apps.append(app)

    def _start_consumer(self, key: tuple[str, str], consumer: ConsumerInfo) -> None:
        subject = f"queue {key[0]}/{key[1]}: push consumer {consumer.script_name!r}"
        handler = self.sources.handlers.get(consumer.script_name)
        if handler is None:
            self._report.state(subject, f"{NO_WORKER} (this server runs {self._loaded()})", logging.INFO)
            return
        try:
            app = _consumer_app(self.engine, key, consumer, handler)
            app.start()
        except Exception as exc:  # this consumer only: the others, and the next refresh, go on
            self._report.state(subject, f"cannot start: {exc}", exc_info=not isinstance(exc, ConveyorError))
            return
        self._report.clear(subject)
        log.info("%s: running", subject)
        self.apps[key] = (consumer.consumer_id, app)

    def _loaded(self) -> str:
        names = sorted(self.sources.handlers)
        return ", ".join(names) if names else "no handlers: name them with --worker APP or --handlers MODULE"

    def concurrency(self, account: str, queue: str) -> int | None:
        entry = self.apps.get((account, queue))
        return entry[1].concurrency(queue) if entry is not None else None

    def runs(self) -> list[WorkerRun]:
        """Everything this server runs, named as the catalog names it (account-qualified): each app
        names its queues as its own account's view does, so the name is looked up by queue id."""
        apps = [*self.operator_apps, *(app for _, app in list(self.apps.values()))]
        runs = []
        for run in (run for app in apps for run in app.runs()):
            try:
                runs.append(dataclasses.replace(run, queue_name=self.engine.get_queue_by_id(run.queue_id).queue_name))
            except QueueNotFound:  # deleted since: the next refresh stops its app
                continue
        return runs

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._presence is not None:
            self._presence.stop()
        for app in [*(app for _, app in self.apps.values()), *self.operator_apps]:
            app.stop()


def _consumer_app(engine: Engine, key: tuple[str, str], consumer: ConsumerInfo, handler: Handler) -> App:
    """An App running ``handler`` as the account's consumer, with the consumer's registered settings."""
    account, queue = key
    s = consumer.settings
    app = App(Conveyor(AccountEngine(engine, account)))
    app.registers_itself = False  # the server's one registry entry lists it
    app.consumer(
        queue,
        max_batch_size=s.batch_size,
        max_batch_timeout=s.max_wait_time_ms / 1000,
        max_retries=s.max_retries,
        retry_delay=s.retry_delay,
        # The catalog holds the account-qualified name (acc/q-dlq); the account's view wants its own.
        dead_letter_queue=split(consumer.dead_letter_queue)[1] or None,
        max_concurrency=s.max_concurrency,
        visibility_timeout_ms=s.visibility_timeout_ms,
    )(handler)
    return app

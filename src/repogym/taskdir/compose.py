"""A task's ``environment/docker-compose.yaml``, read into a small typed model.

Harbor merges the task's compose file over its own: the agent's container is the service
``main`` (built from ``environment/``, running ``sleep infinity``); every other service is a
*sidecar* started with it (``docker compose up --wait``). This module reads the file (``${VAR}``
interpolation from the variables it is given), turns each service into a :class:`Service`, and
lists what repogym cannot honour (:func:`compose_refusals`), one line each, so ``validate
--runnable`` and ``run`` refuse the same tasks.

repogym runs every service of a task in **one shared network namespace** (see
``docs/sandbox.md``): service names resolve to the loopback address, so two services that
declare the same container port would collide; that is refused where ports are declared.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from repogym.errors import RepogymError

if TYPE_CHECKING:
    from repogym.taskdir.config import TaskConfig

MAIN = "main"
"""Harbor's name for the agent's service."""
COMPOSE_FILE = "docker-compose.yaml"
"""The one compose file Harbor reads (``environment/docker-compose.yaml``)."""
IGNORED_COMPOSE_FILES = ("docker-compose.yml", "compose.yaml", "compose.yml")
"""Names Docker Compose would read but Harbor does not: such a file is not the task's."""
CONDITIONS = ("service_started", "service_healthy", "service_completed_successfully")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_VAR_RE = re.compile(r"\$(?:\$|\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}|([A-Za-z_]\w*))")
_DURATION_RE = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_HARMLESS = frozenset(
    {
        "container_name", "restart", "labels", "logging", "stdin_open", "tty", "init",
        "hostname", "domainname", "networks", "platform", "pull_policy", "ulimits", "deploy",
        "mem_limit", "memswap_limit", "mem_reservation", "cpus", "cpu_shares", "cpu_quota",
        "cpuset", "shm_size", "stop_signal", "stop_grace_period", "links", "tmpfs",
        "oom_score_adj", "dns", "dns_search", "expose", "ports", "profiles",
    }
)  # fmt: skip
"""Keys that change nothing a trial can observe here (restart policy, logging, names…)."""
_SUPPORTED = frozenset(
    {
        "build", "image", "command", "entrypoint", "environment", "env_file", "working_dir",
        "user", "depends_on", "healthcheck", "volumes", "extra_hosts",
    }
)  # fmt: skip
_MAIN_FIXED = ("image", "command", "entrypoint", "working_dir", "user")
"""Keys of ``main`` that would replace the task's own environment (refused); its ``build``
is run when it stays inside the task (:func:`_build`)."""
_TOP_LEVEL = frozenset({"services", "volumes", "networks", "version", "name"})


class ComposeError(RepogymError, ValueError):
    """The compose file cannot be read; the message is one line."""


@dataclass(frozen=True)
class Healthcheck:
    """Docker's healthcheck: ``test`` is an argv (``CMD``) or a shell line (``CMD-SHELL``)."""

    test: tuple[str, ...] | str
    interval_s: float = 30.0
    timeout_s: float = 30.0
    retries: int = 3
    start_period_s: float = 0.0
    start_interval_s: float = 5.0

    def argv(self) -> list[str]:
        """The command to exec (a shell line runs under ``/bin/sh -c``)."""
        if isinstance(self.test, str):
            return ["/bin/sh", "-c", self.test]
        return list(self.test)


def task_healthcheck(raw: Mapping[str, Any], where: str) -> Healthcheck:
    """Harbor's ``[environment.healthcheck]`` / ``[steps.healthcheck]`` table: ``command`` (a
    shell line), ``interval_sec`` (5), ``timeout_sec`` (30), ``start_period_sec`` (0),
    ``start_interval_sec`` (5), ``retries`` (3). Raises ValueError naming the bad key."""
    command = raw.get("command")
    if not isinstance(command, str) or not command.strip():
        raise ValueError(f"{where}.command must be a shell command")
    unknown = set(raw) - {
        "command",
        "interval_sec",
        "timeout_sec",
        "start_period_sec",
        "start_interval_sec",
        "retries",
    }
    if unknown:
        raise ValueError(f"{where}: unknown key {sorted(unknown)[0]!r}")

    def number(key: str, default: float) -> float:
        value = raw.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise ValueError(f"{where}.{key} must be a number ≥ 0")
        return float(value)

    retries = raw.get("retries", 3)
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 1:
        raise ValueError(f"{where}.retries must be an integer ≥ 1")
    return Healthcheck(
        test=command,
        interval_s=number("interval_sec", 5.0),
        timeout_s=number("timeout_sec", 30.0),
        retries=retries,
        start_period_s=number("start_period_sec", 0.0),
        start_interval_s=number("start_interval_sec", 5.0),
    )


@dataclass(frozen=True)
class Dependency:
    service: str
    condition: str = "service_started"


@dataclass(frozen=True)
class Build:
    context: Path
    dockerfile: str = "Dockerfile"
    target: str | None = None


@dataclass
class Service:
    """One compose service, as repogym runs it."""

    name: str
    build: Build | None = None
    image: str | None = None
    command: list[str] | None = None
    entrypoint: list[str] | None = None
    environment: dict[str, str] = field(default_factory=dict)
    working_dir: str | None = None
    user: str | None = None
    depends_on: list[Dependency] = field(default_factory=list)
    healthcheck: Healthcheck | None = None
    healthcheck_disabled: bool = False
    ports: list[tuple[int, str]] = field(default_factory=list)
    """Container ports it declares (``ports``/``expose``), as (port, protocol)."""
    published: list[str] = field(default_factory=list)
    """``ports`` entries that would publish to the host (not done here; noted)."""
    extra_hosts: dict[str, str] = field(default_factory=dict)
    cpus: float | None = None
    memory_mb: int | None = None
    offline: bool = False
    """``network_mode: none``: no network at all (for ``main``: the task runs offline)."""
    problems: list[str] = field(default_factory=list)
    """Why repogym cannot run this service as written (one line each)."""


@dataclass
class Compose:
    """The services of one compose file; ``main`` is always there (Harbor adds it)."""

    path: Path
    services: dict[str, Service]
    problems: list[str] = field(default_factory=list)

    @property
    def main(self) -> Service:
        return self.services[MAIN]

    @property
    def sidecars(self) -> list[Service]:
        return [s for n, s in self.services.items() if n != MAIN]

    def order(self) -> list[str]:
        """Service names in start order (dependencies first; ties by file order)."""
        done: list[str] = []
        seen: set[str] = set()

        def visit(name: str, stack: tuple[str, ...]) -> None:
            if name in done:
                return
            if name in stack:
                raise ComposeError(f"depends_on cycle: {' -> '.join((*stack, name))}")
            for dep in self.services[name].depends_on:
                if dep.service in self.services:
                    visit(dep.service, (*stack, name))
            if name not in seen:
                seen.add(name)
                done.append(name)

        for name in self.services:
            visit(name, ())
        return done


def compose_path(environment_dir: Path) -> Path | None:
    """The task's compose file (a regular file, never a symlink), if it has one: only
    :data:`COMPOSE_FILE`, the one name Harbor reads."""
    path = environment_dir / COMPOSE_FILE
    return path if path.is_file() and not path.is_symlink() else None


def ignored_compose_files(environment_dir: Path) -> list[str]:
    """Compose files under another name than Harbor's (neither run nor refused here)."""
    return [n for n in IGNORED_COMPOSE_FILES if os.path.lexists(environment_dir / n)]


def interpolate(text: str, variables: Mapping[str, str]) -> str:
    """Compose's ``${VAR}``, ``${VAR:-default}``, ``${VAR-default}``, ``${VAR:?err}``, ``$VAR``
    and ``$$`` from ``variables`` only (an unknown variable is empty, like compose)."""

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1) or m.group(4)
        op, arg = m.group(2), m.group(3) or ""
        value = variables.get(name)
        if op in (":-", "-"):
            return arg if value is None or (op == ":-" and value == "") else value
        if op in (":?", "?") and (value is None or (op == ":?" and value == "")):
            raise ComposeError(f"variable {name} is required: {arg or 'not set'}")
        return value or ""

    return _VAR_RE.sub(sub, text)


def duration_s(value: Any, where: str) -> float:
    """``"1m30s"`` / ``"500ms"`` / a number of seconds → seconds."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    text = str(value).strip()
    parts = _DURATION_RE.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ComposeError(f"{where}: not a duration: {value!r} (use e.g. 5s, 1m30s)")
    scale = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}
    return sum(float(n) * scale[u] for n, u in parts)


def _words(value: Any, where: str) -> list[str]:
    """A compose command/entrypoint: a list, or a string split like a shell would."""
    if isinstance(value, list):
        return [str(v) for v in value]
    if isinstance(value, str):
        try:
            return shlex.split(value)
        except ValueError as exc:
            raise ComposeError(f"{where}: {exc}") from None
    raise ComposeError(f"{where}: expected a string or a list")


def _mapping(value: Any, where: str) -> dict[str, str]:
    """``environment``/``extra_hosts``: a mapping or a list of ``K=V`` (``K:V``) items."""
    if value is None:
        return {}
    if isinstance(value, dict):
        return {str(k): "" if v is None else str(v) for k, v in value.items()}
    if isinstance(value, list):
        out = {}
        for item in value:
            text = str(item)
            sep = "=" if "=" in text else ":"
            key, _, val = text.partition(sep)
            out[key.strip()] = val
        return out
    raise ComposeError(f"{where}: expected a mapping or a list")


def _size_mb(value: Any) -> int | None:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([bkmg]?)b?\s*", str(value).lower())
    if not m:
        return None
    factor = {"": 1 / (1 << 20), "b": 1 / (1 << 20), "k": 1 / 1024, "m": 1, "g": 1024}
    return max(1, int(float(m.group(1)) * factor[m.group(2)]))


def _healthcheck(raw: Any, where: str) -> tuple[Healthcheck | None, bool]:
    """(healthcheck, disabled) from a compose ``healthcheck`` mapping."""
    if not isinstance(raw, dict):
        raise ComposeError(f"{where}: expected a mapping")
    if raw.get("disable"):
        return None, True
    test = raw.get("test")
    if isinstance(test, list):
        if not test:
            raise ComposeError(f"{where}.test is empty")
        kind, rest = str(test[0]).upper(), [str(t) for t in test[1:]]
        if kind == "NONE":
            return None, True
        if kind == "CMD":
            parsed: tuple[str, ...] | str = tuple(rest)
        elif kind == "CMD-SHELL":
            parsed = " ".join(rest)
        else:
            raise ComposeError(f"{where}.test must start with CMD, CMD-SHELL or NONE")
    elif isinstance(test, str) and test.strip():
        parsed = test
    else:
        raise ComposeError(f"{where}.test is missing")
    opts: dict[str, Any] = {}
    for key, attr in (
        ("interval", "interval_s"),
        ("timeout", "timeout_s"),
        ("start_period", "start_period_s"),
        ("start_interval", "start_interval_s"),
    ):
        if key in raw:
            opts[attr] = duration_s(raw[key], f"{where}.{key}")
    if "retries" in raw:
        opts["retries"] = max(1, int(raw["retries"]))
    return Healthcheck(parsed, **opts), False


def dockerfile_healthcheck(raw: str | None) -> Healthcheck | None:
    """A Dockerfile ``HEALTHCHECK`` line (as the build recorded it) → :class:`Healthcheck`."""
    if not raw:
        return None
    words = raw.split(None, 1)
    rest = words[1] if words and words[0].upper() == "HEALTHCHECK" and len(words) > 1 else raw
    opts: dict[str, Any] = {}
    while rest.startswith("--"):
        flag, _, rest = rest.partition(" ")
        key, _, value = flag[2:].partition("=")
        attr = {
            "interval": "interval_s",
            "timeout": "timeout_s",
            "start-period": "start_period_s",
            "start-interval": "start_interval_s",
        }.get(key)
        if attr:
            opts[attr] = duration_s(value, f"HEALTHCHECK --{key}")
        elif key == "retries":
            opts["retries"] = max(1, int(value))
        rest = rest.lstrip()
    kind, _, cmd = rest.partition(" ")
    if kind.upper() != "CMD":
        return None  # NONE or unparseable: no healthcheck
    cmd = cmd.strip()
    if cmd.startswith("["):
        import json

        try:
            return Healthcheck(tuple(str(x) for x in json.loads(cmd)), **opts)
        except (ValueError, TypeError):
            return None
    return Healthcheck(cmd, **opts)


def _ports(svc: Service, raw: dict[str, Any]) -> None:
    """Container ports of ``ports``/``expose``; host publishing is noted, not done."""
    entries: list[tuple[Any, bool]] = [(p, True) for p in raw.get("ports") or []]
    entries += [(p, False) for p in raw.get("expose") or []]
    for entry, is_ports in entries:
        if isinstance(entry, dict):
            target, proto = str(entry.get("target", "")), str(entry.get("protocol", "tcp"))
            published = bool(entry.get("published"))
        else:
            text = str(entry)
            text, _, proto = text.partition("/")
            proto = proto or "tcp"
            target = text.rsplit(":", 1)[-1]
            published = is_ports and ":" in text
        lo, _, hi = target.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            svc.problems.append(f"service {svc.name!r}: cannot read port {entry!r}")
            continue
        svc.ports += [(p, proto) for p in range(int(lo), int(hi or lo) + 1)]
        if published:
            svc.published.append(str(entry))


def _volumes(svc: Service, raw: Any, named: dict[str, list[str]]) -> None:
    for vol in raw or []:
        if isinstance(vol, dict):
            kind, source = str(vol.get("type", "volume")), vol.get("source")
        else:
            source, sep, _target = str(vol).partition(":")
            if not sep:
                continue  # an anonymous volume: a folder of the service's own root
            kind = "bind" if source.startswith((".", "/", "~")) else "volume"
        if kind == "bind":
            svc.problems.append(
                f"service {svc.name!r}: host bind mounts (volumes: {vol!r}) are not supported: "
                "a task's services never see the host's files"
            )
        elif kind == "volume" and source:
            named.setdefault(str(source), []).append(svc.name)
        elif kind not in ("volume", "tmpfs"):
            svc.problems.append(f"service {svc.name!r}: volume type {kind!r} is not supported")


def _service(name: str, raw: Any, env_dir: Path, task_dir: Path, named: dict) -> Service:
    where = f"services.{name}"
    if not isinstance(raw, dict):
        raise ComposeError(f"{where}: expected a mapping")
    svc = Service(name)
    if not _NAME_RE.match(name):
        svc.problems.append(f"service name {name!r} is not a valid compose service name")
    for key in raw:
        if key in _SUPPORTED or key in _HARMLESS or str(key).startswith("x-"):
            continue
        why = {
            "network_mode": "a task's services share one private network here",
            "privileged": "services never get more privileges than Docker's defaults",
            "cap_add": "services never get more privileges than Docker's defaults",
            "devices": "no host devices reach a sandbox",
            "volumes_from": "services do not share file systems",
            "secrets": "compose secrets are not supported",
            "configs": "compose configs are not supported",
        }.get(key, "not supported by repogym's local sandbox")
        if key == "network_mode" and str(raw[key]).startswith("service:"):
            continue  # sharing another service's network: what every service does here
        if key == "network_mode" and str(raw[key]) == "none" and name == MAIN:
            svc.offline = True  # Harbor's airgapped main: the whole task runs with no network
            continue
        if key in ("pid", "ipc") and str(raw[key]) not in ("host",):
            continue
        svc.problems.append(f"service {name!r}: {key}: {raw[key]!r} ({why})")
    build = raw.get("build")
    if build is not None:
        spec = {"context": build} if isinstance(build, str) else dict(build)
        for key in spec:
            if key not in ("context", "dockerfile", "target"):
                svc.problems.append(f"service {name!r}: build.{key} is not supported")
        svc.build = _build(svc, spec, env_dir, task_dir)
    if raw.get("image") is not None:
        svc.image = str(raw["image"])
    if raw.get("command") is not None:
        svc.command = _words(raw["command"], f"{where}.command")
    if raw.get("entrypoint") is not None:
        svc.entrypoint = _words(raw["entrypoint"], f"{where}.entrypoint")
    for env_file in _listify(raw.get("env_file")):
        svc.environment.update(_env_file(env_file, env_dir, task_dir, where))
    svc.environment.update(_mapping(raw.get("environment"), f"{where}.environment"))
    svc.extra_hosts = _mapping(raw.get("extra_hosts"), f"{where}.extra_hosts")
    if raw.get("working_dir") is not None:
        svc.working_dir = str(raw["working_dir"])
    if raw.get("user") is not None:
        svc.user = str(raw["user"])
    deps = raw.get("depends_on") or []
    if isinstance(deps, dict):
        for dep, cfg in deps.items():
            cond = str((cfg or {}).get("condition", "service_started"))
            if cond not in CONDITIONS:
                raise ComposeError(f"{where}.depends_on.{dep}: unknown condition {cond!r}")
            svc.depends_on.append(Dependency(str(dep), cond))
    else:
        svc.depends_on = [Dependency(str(d)) for d in deps]
    if raw.get("healthcheck") is not None:
        svc.healthcheck, svc.healthcheck_disabled = _healthcheck(
            raw["healthcheck"], f"{where}.healthcheck"
        )
    _ports(svc, raw)
    _volumes(svc, raw.get("volumes"), named)
    limits = ((raw.get("deploy") or {}).get("resources") or {}).get("limits") or {}
    cpus = raw.get("cpus", limits.get("cpus"))
    svc.cpus = float(cpus) if cpus is not None else None
    memory = raw.get("mem_limit", limits.get("memory"))
    svc.memory_mb = _size_mb(memory) if memory is not None else None
    return svc


def _within(path: Path, task_dir: Path) -> bool:
    root = task_dir.resolve()
    return path == root or root in path.parents


def _build(svc: Service, spec: dict[str, Any], env_dir: Path, task_dir: Path) -> Build:
    """A ``build`` mapping: the context (relative to ``environment/``) and the Dockerfile
    (relative to the context, or absolute) must both stay inside the task folder; the
    Dockerfile is kept relative to the context."""
    context = (env_dir / str(spec.get("context", "."))).resolve()
    dockerfile = (context / str(spec.get("dockerfile", "Dockerfile"))).resolve()
    if not _within(context, task_dir):
        svc.problems.append(f"service {svc.name!r}: build context {context} is outside the task")
    elif not _within(dockerfile, task_dir):
        svc.problems.append(f"service {svc.name!r}: Dockerfile {dockerfile} is outside the task")
    elif context not in dockerfile.parents:
        svc.problems.append(
            f"service {svc.name!r}: Dockerfile {dockerfile} is outside its build context"
        )
    target = spec.get("target")
    rel = os.path.relpath(dockerfile, context)
    return Build(context, rel, None if target is None else str(target))


def _listify(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def _env_file(entry: Any, env_dir: Path, task_dir: Path, where: str) -> dict[str, str]:
    rel = entry.get("path") if isinstance(entry, dict) else entry
    required = entry.get("required", True) if isinstance(entry, dict) else True
    path = (env_dir / str(rel)).resolve()
    if task_dir.resolve() not in path.parents:
        raise ComposeError(f"{where}.env_file {rel!r} is outside the task")
    if not path.is_file():
        if required:
            raise ComposeError(f"{where}.env_file {rel!r} not found")
        return {}
    out = {}
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip().strip("'\"")
    return out


SLEEP_FOREVER = (
    ["sleep", "infinity"],
    ["sh", "-c", "sleep infinity"],
    ["/bin/sh", "-c", "sleep infinity"],
)
"""``main``'s command in Harbor's own compose files (what repogym runs anyway)."""
MAIN_IMAGE_NAME = "repogym-task-main"
"""The value of ``${MAIN_IMAGE_NAME}`` (Harbor's tag for the task's built image)."""


def _restates_default(key: str, value: Any, env_dir: Path) -> bool:
    """Whether ``main``'s ``key: value`` only restates what Harbor (and repogym) does anyway:
    tag the task's image, run ``sleep infinity``."""
    if key == "image":
        return str(value) in ("", MAIN_IMAGE_NAME)
    if key == "command":
        words = value.split() if isinstance(value, str) else value
        return isinstance(words, list) and [str(w) for w in words] in SLEEP_FOREVER
    return False


def _main_problems(raw: dict[str, Any], env_dir: Path) -> list[str]:
    fixed = [
        k
        for k in _MAIN_FIXED
        if raw.get(k) is not None and not _restates_default(k, raw[k], env_dir)
    ]
    return [
        f"service 'main': {k} would replace the task's own environment (environment/"
        "Dockerfile or [environment].docker_image); not supported"
        for k in fixed
    ]


def load_compose(path: Path, variables: Mapping[str, str], task_dir: Path) -> Compose:
    """Read and interpolate a compose file; :class:`ComposeError` when it cannot be read.

    What repogym cannot honour is listed in :attr:`Compose.problems` and each
    :attr:`Service.problems` (see :func:`compose_refusals`), not raised.
    """
    import yaml

    try:
        text = interpolate(path.read_text(encoding="utf-8", errors="replace"), variables)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        first = " ".join(str(exc).split())[:200]
        raise ComposeError(f"{path.name}: not valid YAML ({first})") from None
    except ComposeError as exc:
        raise ComposeError(f"{path.name}: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("services") or {}, dict):
        raise ComposeError(f"{path.name}: expected a mapping with `services`")
    problems = [
        f"top-level {key!r} is not supported"
        for key in data
        if key not in _TOP_LEVEL and not str(key).startswith("x-")
    ]
    named: dict[str, list[str]] = {}
    services: dict[str, Service] = {}
    try:
        for name, raw in (data.get("services") or {}).items():
            if isinstance(raw, dict) and raw.get("profiles"):
                continue  # not started by a plain `docker compose up`
            svc = _service(str(name), raw, path.parent, task_dir, named)
            if name == MAIN:
                svc.problems += _main_problems(raw, path.parent)
            services[str(name)] = svc
        services.setdefault(MAIN, Service(MAIN))
        compose = Compose(path, services, problems)
        _check_links(compose, named)
        compose.order()
    except ComposeError as exc:
        raise ComposeError(f"{path.name}: {exc}") from None
    return compose


def _check_links(compose: Compose, named: dict[str, list[str]]) -> None:
    services = compose.services
    for volume, users in sorted(named.items()):
        if len(set(users)) > 1:
            compose.problems.append(
                f"volume {volume!r} is shared by services {', '.join(sorted(set(users)))}: "
                "services do not share file systems here"
            )
    for svc in services.values():
        if svc.name != MAIN and svc.build is None and svc.image is None:
            svc.problems.append(f"service {svc.name!r} has neither build nor image")
        for dep in svc.depends_on:
            target = services.get(dep.service)
            if target is None:
                svc.problems.append(f"service {svc.name!r} depends on unknown {dep.service!r}")
            elif (
                dep.condition == "service_healthy"
                and target.healthcheck is None
                and (target.healthcheck_disabled or not _dockerfile_has_healthcheck(target))
            ):
                svc.problems.append(
                    f"service {svc.name!r} waits for {dep.service!r} to be healthy, "
                    f"but {dep.service!r} has no healthcheck"
                )
    owners: dict[tuple[int, str], str] = {}
    for svc in services.values():
        for port in dict.fromkeys(svc.ports):
            other = owners.setdefault(port, svc.name)
            if other != svc.name:
                compose.problems.append(
                    f"services {other!r} and {svc.name!r} both use port {port[0]}/{port[1]}: "
                    "a task's services share one network namespace here, so one port has "
                    "one owner"
                )


def _dockerfile_has_healthcheck(svc: Service) -> bool:
    if svc.build is None:
        return False
    path = svc.build.context / svc.build.dockerfile
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return re.search(r"^\s*HEALTHCHECK\s+(?!NONE)", text, re.M | re.I) is not None


def compose_refusals(compose: Compose) -> list[str]:
    """Every reason repogym cannot run these services (one line each)."""
    reasons = list(compose.problems)
    for svc in compose.services.values():
        reasons += svc.problems
    return reasons


def compose_variables(
    config: TaskConfig, task_dir: Path, host_env: Mapping[str, str] | None = None
) -> dict[str, str]:
    """What ``${VAR}`` in a task's compose file may name: Harbor's own compose variables
    (paths inside the sandbox, resources) and the task's ``[environment].env`` (host
    variables only when passed, see :func:`repogym.taskdir.trust.expand_env`)."""
    from repogym.taskdir.trust import expand_env

    env = config.environment
    out = {
        "CONTEXT_DIR": str((task_dir / "environment").resolve()),
        "ENV_VERIFIER_LOGS_PATH": "/logs/verifier",
        "ENV_AGENT_LOGS_PATH": "/logs/agent",
        "ENV_ARTIFACTS_PATH": "/logs/artifacts",
        "CPUS": f"{env.cpus:g}",
        "MEMORY": f"{env.memory_mb}M",
        "MAIN_IMAGE_NAME": MAIN_IMAGE_NAME,
        "TEST_DIR": "/tests",
    }
    if env.docker_image:
        out["PREBUILT_IMAGE_NAME"] = env.docker_image
    out.update(expand_env(env.env, host_env or {})[0])
    return out


def task_compose(
    config: TaskConfig, task_dir: Path, host_env: Mapping[str, str] | None = None
) -> Compose | None:
    """The task's services (None without a compose file); :class:`ComposeError` when the file
    cannot be read."""
    path = compose_path(task_dir / "environment")
    if path is None:
        return None
    return load_compose(path, compose_variables(config, task_dir, host_env), task_dir)

"""One way to load a service's settings: flags, then environment, then a YAML file.

Both services describe their settings as one pydantic-settings class with
nested groups, derived from :class:`ServiceSettings`, and load them with
:func:`load_settings`. A value is taken from the first of:

1. a command-line flag (``flags``, by dotted setting name: ``timeouts.connect_s``);
2. the environment: the class's ``env_prefix`` and ``__`` between a group and
   its key (``TIDAL_ACTIVATOR_TIMEOUTS__CONNECT_S=2``, ``TIDAL_SCALER_PORT``);
3. the ``--config`` YAML file, with the same shape as the class
   (``timeouts: {connect_s: 2}``);
4. the default.

Main decision: **a bad value is named where the user wrote it.** pydantic
reports a field path and its own wording (``Input should be a valid
integer``), which a user who typed ``--port abc`` has to translate. Every
problem here becomes one line naming the flag, the environment variable or
the file's key that gave the value, the value, and what is allowed (read
from the field's type and bounds), for example::

    --port 'abc': not a valid integer; allowed: an integer from 0 to 65535
    TIDAL_SCALER_LEADER__LEASE_DURATION_S '-1': should be greater than 0; allowed: a number above 0

Checks across fields (a service's model validator) already name their keys;
their message is kept as written.
"""

from __future__ import annotations

import argparse
import contextvars
import enum
import os
import types
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import annotated_types
import yaml
from pydantic import BaseModel, SecretStr, ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

__all__ = [
    "FlagSpec",
    "ServiceSettings",
    "SettingsError",
    "add_setting_flags",
    "allowed_values",
    "env_name",
    "flag_specs",
    "flags_from_args",
    "load_settings",
    "setting_fields",
    "visible_secret_warnings",
]

S = TypeVar("S", bound="ServiceSettings")

# pydantic-settings builds its sources from the class, not from the call, so
# the file one load read reaches its source through a context variable: two
# loads at once (tests, one process running both services) never see each
# other's file.
_FILE_DATA: contextvars.ContextVar[Mapping[str, Any] | None] = contextvars.ContextVar(
    "tidal_settings_file", default=None
)


class SettingsError(ValueError):
    """Settings that cannot be used; one line per problem, each naming where it came from."""


class _FileSource(PydanticBaseSettingsSource):
    """The ``--config`` YAML file, lowest in precedence (read by :func:`load_settings`)."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return (_FILE_DATA.get() or {}).get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(_FILE_DATA.get() or {})


class ServiceSettings(BaseSettings):
    """A service's settings: flags (the constructor's arguments) over environment over file."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, _FileSource(settings_cls))


def setting_fields(model: type[BaseModel], prefix: str = "") -> Iterator[tuple[str, FieldInfo]]:
    """Every leaf setting of ``model`` by dotted name (``timeouts.connect_s``)."""
    for name, info in model.model_fields.items():
        annotation = info.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield from setting_fields(annotation, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}", info


def env_name(cls: type[ServiceSettings], dotted: str) -> str:
    """The environment variable of a dotted setting name."""
    prefix = str(cls.model_config.get("env_prefix") or "")
    return prefix + dotted.replace(".", "__").upper()


def _deep_set(target: dict[str, Any], dotted: str, value: Any) -> None:
    *groups, last = dotted.split(".")
    for group in groups:
        target = target.setdefault(group, {})
    target[last] = value


def _read_file(config_file: str | Path) -> Mapping[str, Any]:
    try:
        loaded = yaml.safe_load(Path(config_file).read_text(encoding="utf-8")) or {}
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(
            f"--config {config_file}: not a readable file ({exc}); allowed: a YAML file"
        ) from exc
    except yaml.YAMLError as exc:
        raise SettingsError(f"--config {config_file}: not valid YAML: {exc}") from exc
    if not isinstance(loaded, dict):
        raise SettingsError(
            f"--config {config_file}: expected a YAML mapping of setting names at the top"
        )
    return loaded


def load_settings(
    cls: type[S],
    *,
    flags: Mapping[str, Any] | None = None,
    config_file: str | Path | None = None,
    flag_names: Mapping[str, str] | None = None,
) -> S:
    """``cls`` from ``flags`` (dotted names; ``None`` values are unset), the
    environment and ``config_file``.

    ``flag_names`` maps a dotted setting to the flag that sets it, for a
    service whose flags are not ``--`` and the dotted name with dashes (the
    scaler's ``--kubeconfig`` sets ``kube.kubeconfig``). Raises
    :class:`SettingsError`.
    """
    file_data = _read_file(config_file) if config_file is not None else {}
    given = {name: value for name, value in (flags or {}).items() if value is not None}
    init: dict[str, Any] = {}
    for name, value in given.items():
        _deep_set(init, name, value)
    token = _FILE_DATA.set(file_data)
    try:
        return cls(**init)
    except ValidationError as exc:
        origin = _Given(cls, given, flag_names, file_data, config_file)
        lines = [origin.describe(error) for error in exc.errors(include_url=False)]
        raise SettingsError("\n".join(lines)) from None
    finally:
        _FILE_DATA.reset(token)


def _field_path(cls: type[BaseModel], loc: tuple[int | str, ...]) -> tuple[str, FieldInfo | None]:
    """The dotted setting a pydantic error location points at (past union members)."""
    model: type[BaseModel] | None = cls
    parts: list[str] = []
    info: FieldInfo | None = None
    for part in loc:
        if model is None or not isinstance(part, str) or part not in model.model_fields:
            break
        info = model.model_fields[part]
        parts.append(part)
        annotation = info.annotation
        is_group = isinstance(annotation, type) and issubclass(annotation, BaseModel)
        model = annotation if is_group and isinstance(annotation, type) else None
    if len(parts) < len(loc) and model is not None:
        # An unknown key inside a group: name it in full, it has no field.
        parts.extend(str(p) for p in loc[len(parts) :])
        info = None
    return ".".join(parts), info


def _in_file(data: Mapping[str, Any], dotted: str) -> bool:
    node: Any = data
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return False
        node = node[part]
    return True


@dataclass(frozen=True, slots=True)
class _Given:
    """Where each value of one load came from, to name it in an error."""

    cls: type[ServiceSettings]
    flags: Mapping[str, Any]
    flag_names: Mapping[str, str] | None
    file_data: Mapping[str, Any]
    config_file: str | Path | None

    def where(self, dotted: str) -> str:
        if dotted in self.flags:
            return _flag(dotted, self.flag_names)
        env = env_name(self.cls, dotted)
        if env.lower() in (k.lower() for k in os.environ):
            return env
        if self.config_file is not None and _in_file(self.file_data, dotted):
            return f"{dotted} in {self.config_file}"
        return f"setting {dotted}"

    def describe(self, error: Any) -> str:
        """One line for one of pydantic's errors."""
        message = str(error.get("msg", ""))
        if error.get("type") == "value_error":
            message = message.removeprefix("Value error, ")
        dotted, info = _field_path(self.cls, tuple(error.get("loc") or ()))
        if not dotted:  # a check across fields: its message names the keys
            return message
        if error.get("type") == "extra_forbidden":
            return f"{self.where(dotted)}: unknown setting"
        value = error.get("input")
        shown = "(secret)" if info is not None and _is_secret(info) else repr(_plain(value))
        line = f"{self.where(dotted)} {shown}: {_reword(message)}"
        if info is not None:
            line += f"; allowed: {allowed_values(info)}"
        return line


def _plain(value: Any) -> Any:
    return str(value) if isinstance(value, Path) else value


def _reword(message: str) -> str:
    """pydantic's sentence, without its "Input should be" preamble."""
    for old, new in (
        ("Input should be a valid ", "not a valid "),
        ("Input should be ", "should be "),
        ("Input is not ", "not "),
    ):
        if message.startswith(old):
            message = new + message.removeprefix(old)
            break
    return message.split(", unable to")[0]


def _flag(dotted: str, flag_names: Mapping[str, str] | None) -> str:
    """The flag that sets ``dotted``: ``--`` and the name with dashes, unless named."""
    if not flag_names:
        return "--" + dotted.replace(".", "-").replace("_", "-")
    return flag_names.get(dotted) or f"setting {dotted}"


def visible_secret_warnings(
    cls: type[ServiceSettings],
    flags: Mapping[str, Any],
    *,
    flag_names: Mapping[str, str] | None = None,
) -> list[str]:
    """A warning for each secret given as a flag (still accepted, for old manifests).

    Every user of the machine reads a process's flags (``ps``, ``/proc``). A
    secret is a ``SecretStr`` setting, or any value holding a URL with
    credentials in it (``http://user:pw@host``).
    """
    fields = dict(setting_fields(cls))
    warnings = []
    for dotted, value in flags.items():
        if value is None or dotted not in fields:
            continue
        flag, env = _flag(dotted, flag_names), env_name(cls, dotted)
        if _is_secret(fields[dotted]):
            also = f"{dotted}_file"
            instead = f"{env} or {_flag(also, flag_names)} FILE" if also in fields else env
            warnings.append(
                f"{flag} is visible to every user of this machine (ps, /proc); "
                f"set {instead} instead"
            )
        elif isinstance(value, str) and "@" in value.partition("://")[2].partition("/")[0]:
            warnings.append(
                f"{flag} holds credentials that every user of this machine sees in ps; "
                f"set {env} instead"
            )
    return warnings


def _is_secret(info: FieldInfo) -> bool:
    return SecretStr in _members(info.annotation)


def _members(annotation: Any) -> list[Any]:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return [m for arg in typing.get_args(annotation) for m in _members(arg)]
    return [annotation]


def _bounds(info: FieldInfo) -> str:
    low = high = ""
    for item in info.metadata:
        if isinstance(item, annotated_types.Ge):
            low = f"from {item.ge}"
        elif isinstance(item, annotated_types.Gt):
            low = f"above {item.gt}"
        elif isinstance(item, annotated_types.Le):
            high = f"to {item.le}" if low.startswith("from") else f"at most {item.le}"
        elif isinstance(item, annotated_types.Lt):
            high = f"below {item.lt}"
    if low.startswith("from") and not high:
        low = f"{low.removeprefix('from ')} or more"
    joiner = " " if low.startswith("from") else " and "
    return joiner.join(part for part in (low, high) if part)


def allowed_values(info: FieldInfo) -> str:
    """What a field accepts, in words: its type and bounds."""
    kinds = [m for m in _members(info.annotation) if m is not type(None)]
    bounds = _bounds(info)
    words: list[str] = []
    for kind in kinds:
        if kind is bool:
            words.append("true or false")
        elif kind is int:
            words.append("an integer")
        elif kind is float:
            words.append("a number")
        elif kind is Path:
            words.append("a file path")
        elif kind is SecretStr:
            words.append("a secret string")
        elif isinstance(kind, type) and issubclass(kind, enum.Enum):
            words.append("one of " + ", ".join(str(m.value) for m in kind))
        elif typing.get_origin(kind) is typing.Literal:
            words.append("one of " + ", ".join(str(a) for a in typing.get_args(kind)))
        else:
            words.append("text")
    text = " or ".join(words) or "a value"
    return f"{text} {bounds}" if bounds else text


@dataclass(frozen=True, slots=True)
class FlagSpec:
    """One command-line flag derived from a settings field."""

    flag: str  # --timeouts-connect-s
    dotted: str  # timeouts.connect_s
    is_bool: bool
    help: str
    metavar: str = "VALUE"


def flag_specs(
    cls: type[ServiceSettings], *, flag_names: Mapping[str, str] | None = None
) -> list[FlagSpec]:
    """A flag for every setting of ``cls`` (only those ``flag_names`` names, when
    given), whose help names its default and environment variable."""
    specs: list[FlagSpec] = []
    for dotted, info in setting_fields(cls):
        if flag_names is not None and dotted not in flag_names:
            continue
        default = info.get_default(call_default_factory=True)
        shown = "unset" if default is None or default == "" else repr(default)
        if isinstance(default, bool):
            shown = str(default).lower()
        env = env_name(cls, dotted)
        description = info.description or ""
        # A description that explains its own default ("default: $POD_NAME") is not
        # followed by a second one.
        said = "" if "default" in description.lower() else f"default: {shown}; "
        flag = _flag(dotted, flag_names)
        specs.append(
            FlagSpec(
                flag=flag,
                dotted=dotted,
                is_bool=info.annotation is bool,
                help=f"{description} ({said}env {env})",
                metavar=_metavar(flag, dotted, info),
            )
        )
    return specs


def _metavar(flag: str, dotted: str, info: FieldInfo) -> str:
    """What a flag takes, for ``--help``: its unit or kind, not a bare ``VALUE``."""
    kinds = [m for m in _members(info.annotation) if m is not type(None)]
    kind = kinds[0] if len(kinds) == 1 else str
    if typing.get_origin(kind) is typing.Literal:
        return "{" + ",".join(str(a) for a in typing.get_args(kind)) + "}"
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return "{" + ",".join(str(m.value) for m in kind) + "}"
    name = dotted.rpartition(".")[2]
    if kind is float and name.endswith("_s"):
        return "SECONDS"
    if kind is int and name.endswith("_s"):
        return "SECONDS"
    if kind is int and name.endswith("port"):
        return "PORT"
    if kind in (int, float):
        return "N" if kind is int else "NUMBER"
    if kind is Path:
        return "FILE"
    if kind is SecretStr:
        return "SECRET"
    return flag.rpartition("-")[2].upper()


_DEST = "setting__"


def add_setting_flags(
    parser: argparse.ArgumentParser,
    cls: type[ServiceSettings],
    *,
    flag_names: Mapping[str, str] | None = None,
) -> None:
    """Add ``--config FILE`` and the settings' flags (:func:`flag_specs`) to ``parser``.

    No ``type=`` on the flags: :func:`load_settings` checks every value and
    names the flag, the value and what is allowed in one line.
    """
    parser.add_argument(
        "--config", type=Path, metavar="FILE", help="YAML settings file (under flags and env)"
    )
    for spec in flag_specs(cls, flag_names=flag_names):
        dest = _DEST + spec.dotted.replace(".", "__")
        if spec.is_bool:
            parser.add_argument(
                spec.flag, dest=dest, action="store_const", const=True, help=spec.help
            )
        else:
            parser.add_argument(spec.flag, dest=dest, metavar=spec.metavar, help=spec.help)


def flags_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The settings :func:`add_setting_flags` flags gave, by dotted name (``None``: not given)."""
    return {
        key.removeprefix(_DEST).replace("__", "."): value
        for key, value in vars(args).items()
        if key.startswith(_DEST)
    }

"""``blobstate plugins``: every registered plugin, its distribution and version, the backends it provides (URL
schemes, store types, priorities, which backend is in use for each), built-ins and third parties alike; a broken
plugin is listed with its error and does not change the exit code.

Text on stdout, one block per plugin; ``--json`` prints ``{"plugins": [...], "problems": [...]}`` (see
``plugins_payload``). Exit code 0, or the error's exit code when the registry itself is unusable (two plugins
giving the same backend name: ``PluginError``, exit 1).
"""

from __future__ import annotations

import json
from typing import Any

import click

from blobstate.cli import command_settings
from blobstate.errors import BlobstateError
from blobstate.plugin.manager import KIND_NAMES, BlobstatePluginManager, PluginInfo, get_plugin_manager, spec_keys
from blobstate.plugin.records import LocalStoreSpec, Spec, hint_text


def _factory_name(factory: object) -> str:
    if isinstance(factory, str):
        return factory
    module = getattr(factory, "__module__", "?")
    return f"{module}:{getattr(factory, '__qualname__', repr(factory))}"


def _backend(spec: Spec, chosen: dict[tuple[type, str], str]) -> dict[str, Any]:
    keys = spec_keys(spec)
    return {
        "kind": KIND_NAMES.get(type(spec), type(spec).__name__),
        "name": spec.name,
        ("storeType" if isinstance(spec, LocalStoreSpec) else "schemes"):
            spec.store_type if isinstance(spec, LocalStoreSpec) else list(keys),
        "priority": spec.priority,
        "selectedFor": [k for k in keys if chosen.get((type(spec), k)) == spec.name],
        "factory": _factory_name(spec.factory),
        "description": spec.description,
        "installHint": hint_text(spec.install_hint),
    }


def _plugin(info: PluginInfo, chosen: dict[tuple[type, str], str]) -> dict[str, Any]:
    return {
        "name": info.name,
        "distribution": info.distribution or None,
        "version": info.version or None,
        "builtin": info.builtin,
        "status": "broken" if info.error else "ok",
        "error": info.error,
        "backends": [_backend(s, chosen) for s in info.specs],
    }


def plugins_payload(mgr: BlobstatePluginManager | None = None) -> dict[str, Any]:
    """What ``blobstate plugins --json`` prints.

    Shape: ``{"plugins": [{"name", "distribution", "version", "builtin", "status": "ok"|"broken", "error",
    "backends": [{"kind", "name", "schemes" | "storeType", "priority", "selectedFor", "factory", "description",
    "installHint"}]}], "problems": [str]}``; built-ins first, then by name. Raises ``PluginError`` when two
    plugins give one backend name.
    """
    mgr = mgr or get_plugin_manager(command_settings.settings())
    infos = mgr.plugin_infos()
    chosen, problems = mgr.selection()
    return {"plugins": [_plugin(i, chosen) for i in infos], "problems": problems}


def render_text(payload: dict[str, Any]) -> str:
    """The human-readable listing of ``plugins_payload``."""
    lines: list[str] = []
    for p in payload["plugins"]:
        origin = f"{p['distribution'] or '?'} {p['version'] or '?'}" + (" (built-in)" if p["builtin"] else "")
        lines.append(f"{p['name']}  [{origin}]" + ("  BROKEN" if p["status"] == "broken" else ""))
        if p["error"]:
            lines.append(f"    error: {p['error']}")
        for b in p["backends"]:
            served = f"store type {b['storeType']}" if "storeType" in b else "schemes " + ", ".join(b["schemes"])
            used = f"; in use for {', '.join(b['selectedFor'])}" if b["selectedFor"] else "; not selected"
            lines.append(f"    {b['kind']:<15} {b['name']:<16} {served}; priority {b['priority']}{used}")
        if not p["backends"] and not p["error"]:
            lines.append("    (observer hooks only)")
    for problem in payload["problems"]:
        lines.append(f"problem: {problem}")
    return "\n".join(lines)


@click.command(short_help="List plugins, their backends and broken plugins' errors.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def plugins(ctx: click.Context, as_json: bool) -> None:
    """List plugins: distribution, version, backends (schemes, store types), and broken plugins' errors."""
    try:
        payload = plugins_payload()
    except BlobstateError as exc:
        click.echo(f"error: {type(exc).__name__}: {exc}", err=True)
        ctx.exit(exc.exit_code)
        return
    click.echo(json.dumps(payload, indent=2) if as_json else render_text(payload))


__all__ = ["plugins", "plugins_payload", "render_text"]

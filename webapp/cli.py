"""The `agentwatch` command: server, users, agents, tokens, jobs, database."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any

import click
from flask import Flask, current_app
from flask.cli import FlaskGroup, with_appcontext

from . import agents, create_app, jobs, migrate, tokens, users
from .errors import AppError


def _fail(exc: AppError) -> None:
    raise click.ClickException(exc.message)


@contextlib.contextmanager
def _migration_said() -> Iterator[None]:
    """A migration's refusal (what the database holds, and what to do) as the command's
    error, in its words: not a traceback."""
    try:
        yield
    except migrate.Refused as exc:
        raise click.ClickException(str(exc)) from None


def _app() -> Flask:
    """The app, its schema upgraded."""
    with _migration_said():
        return create_app()


@click.group(cls=FlaskGroup, create_app=_app, add_default_commands=False,
             add_version_option=False, load_dotenv=False)
def main() -> None:
    """agentwatch: activity and a live cluster overview for Kubernetes agents."""


# --- server -------------------------------------------------------------------------------

@main.command()
@click.option("--host", default=lambda: os.environ.get("AGENTWATCH_HOST", "127.0.0.1"),
              show_default="127.0.0.1 or $AGENTWATCH_HOST")
@click.option("--port", type=int, default=lambda: int(os.environ.get("AGENTWATCH_PORT", "8000")),
              show_default="8000 or $AGENTWATCH_PORT")
@click.option("--workers", type=int, default=1, show_default=True,
              help="Processes. Cluster watches are shared within a process; one per core "
                   "takes more agent requests.")
@click.option("--threads", type=int, default=lambda: int(os.environ.get("AGENTWATCH_THREADS",
                                                                         "64")),
              show_default="64", help="Threads per process; each open WebSocket holds one.")
def serve(host: str, port: int, workers: int, threads: int) -> None:
    """Run the production server (gunicorn, gthread workers)."""
    from .server import run
    with _migration_said():
        run(host, port, workers, threads)


# --- database -----------------------------------------------------------------------------

@main.group()
def db() -> None:
    """Database schema."""


@db.command("upgrade")
@with_appcontext
def db_upgrade() -> None:
    """Upgrade the schema to the newest revision (also done at every start)."""
    engine = current_app.extensions["db_engine"]
    with _migration_said():
        migrate.upgrade(engine)
    click.echo(f"database at revision {migrate.current_revision(engine)}")


# --- users --------------------------------------------------------------------------------

@main.group("users")
def users_group() -> None:
    """Local accounts."""


@users_group.command("create")
@click.argument("name")
@click.option("--role", type=click.Choice(users.ROLES), required=True)
@with_appcontext
def users_create(name: str, role: str) -> None:
    """Create a user; the password comes from $AGENTWATCH_PASSWORD or a prompt."""
    password = os.environ.get("AGENTWATCH_PASSWORD")
    if password is None:
        if not sys.stdin.isatty():
            raise click.ClickException("Set AGENTWATCH_PASSWORD or run in a terminal to be "
                                       "asked for the password")
        password = click.prompt("Password", hide_input=True, confirmation_prompt=True)
    try:
        users.create(name, role, password)
    except AppError as exc:
        _fail(exc)
    click.echo(f"created {role} {name}")


@users_group.command("token")
@click.argument("name")
@click.option("--token-name", default="cli", show_default=True)
@click.option("--scope", type=click.Choice(users.TOKEN_SCOPES), default="write",
              show_default=True, help="read: GET only; write: what the user's role allows.")
@click.option("--days", type=int, default=None,
              help="Days until it expires (default $AGENTWATCH_PERSONAL_TOKEN_DAYS).")
@with_appcontext
def users_token(name: str, token_name: str, scope: str, days: int | None) -> None:
    """Print a new personal API token (the last line of output)."""
    try:
        raw = users.issue_token(users.get(name), token_name, scope=scope, days=days)
    except AppError as exc:
        _fail(exc)
    click.echo(f"personal token for {name} (shown once):", err=True)
    click.echo(raw)


@users_group.command("delete")
@click.argument("name")
@with_appcontext
def users_delete(name: str) -> None:
    """Delete a user, with their sessions and personal tokens (not the last admin)."""
    try:
        user = users.get(name)
        users.delete(user)
    except AppError as exc:
        _fail(exc)
    click.echo(f"deleted {user.role} {user.name}")


@users_group.command("list")
@with_appcontext
def users_list() -> None:
    for user in users.all_users():
        click.echo(f"{user.name}\t{user.role}")


# --- agents -------------------------------------------------------------------------------

@main.group("agents")
def agents_group() -> None:
    """The agent registry."""


@agents_group.command("create")
@click.argument("name")
@click.option("--kubeconfig", type=click.Path(dir_okay=False), help="Kubeconfig file path.")
@click.option("--context", help="Context in the kubeconfig.")
@click.option("--in-cluster", is_flag=True, help="Use the service account of this pod.")
@click.option("--tunnel", is_flag=True,
              help="Reach the cluster through the agent's own connection (agentwatch agent).")
@with_appcontext
def agents_create(name: str, kubeconfig: str | None, context: str | None,
                  in_cluster: bool, tunnel: bool) -> None:
    """Register an agent."""
    try:
        agents.create(name, kubeconfig, context, in_cluster, tunnel)
    except AppError as exc:
        _fail(exc)
    click.echo(f"created agent {name}")


@agents_group.command("list")
@with_appcontext
def agents_list() -> None:
    """List agents with their connection status."""
    rows: list[Any] = [("NAME", "STATUS", "LAST CONTACT", "CLUSTER")]
    for agent in agents.all_agents():
        status = agents.status(agent)
        cluster = "-"
        if agent.tunnel:
            cluster = "tunnel"
        elif agent.in_cluster:
            cluster = "in-cluster"
        elif agent.kubeconfig_path:
            context = f"#{agent.kube_context}" if agent.kube_context else ""
            cluster = f"{agent.kubeconfig_path}{context}"
        last = status.last_contact.strftime("%Y-%m-%d %H:%M:%S UTC") if status.last_contact \
            else "-"
        rows.append((agent.name, status.label, last, cluster))
    widths = [max(len(str(r[i])) for r in rows) for i in range(4)]
    for row in rows:
        click.echo("  ".join(str(v).ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())


@agents_group.command("configure")
@click.argument("name")
@click.option("-f", "--file", "source", required=True, type=click.File("r", encoding="utf-8"),
              help="The YAML configuration ('-' reads standard input).")
@click.option("--commit", help="The commit the configuration comes from.")
@with_appcontext
def agents_configure(name: str, source: Any, commit: str | None) -> None:
    """Submit a configuration version: printed when accepted, refused with line and column."""
    from .agentconfig import service as configuration
    try:
        accepted = configuration.submit(agents.get(name), source.read(), source="cli",
                                        commit=commit)
    except configuration.ConfigInvalid as exc:
        raise click.ClickException("invalid configuration, nothing changed:\n" + "\n".join(
            f"  {problem.message}" for problem in exc.problems)) from None
    except AppError as exc:
        _fail(exc)
    version = accepted.version
    origin = f"commit {version.commit_sha}" if version.commit_sha else f"digest {version.digest}"
    if accepted.duplicate:
        state = "in force" if accepted.in_force else "not in force"
        click.echo(f"agent {name}: unchanged, version {version.number} ({origin}, {state})")
    else:
        click.echo(f"agent {name}: version {version.number} accepted and in force ({origin})")
    for item in accepted.deprecations:
        click.echo(f"warning: {item.message} (see {item.link})", err=True)


# --- tokens -------------------------------------------------------------------------------

@main.group("tokens")
def tokens_group() -> None:
    """Agent tokens."""


@tokens_group.command("create")
@click.argument("agent")
@click.option("--name", "token_name", required=True, help="A name for the token.")
@with_appcontext
def tokens_create(agent: str, token_name: str) -> None:
    """Create an agent token and print it (the last line of output, shown once)."""
    try:
        _, raw = tokens.create(agents.get(agent), token_name, by_user=None)
    except AppError as exc:
        _fail(exc)
    click.echo(f"token {token_name} for agent {agent} (shown once):", err=True)
    click.echo(raw)


@tokens_group.command("revoke")
@click.argument("agent")
@click.argument("token_name")
@with_appcontext
def tokens_revoke(agent: str, token_name: str) -> None:
    """Revoke an agent token; it stops working at once."""
    try:
        tokens.revoke(agents.get(agent), token_name, by_user=None)
    except AppError as exc:
        _fail(exc)
    click.echo(f"revoked token {token_name} of agent {agent}")


# --- jobs ---------------------------------------------------------------------------------

@main.group("jobs")
def jobs_group() -> None:
    """Scheduled jobs."""


@jobs_group.command("run")
@click.argument("name", type=click.Choice(sorted(jobs.JOBS)))
@with_appcontext
def jobs_run(name: str) -> None:
    """Run one job once, now."""
    app: Flask = current_app._get_current_object()  # type: ignore[attr-defined]
    count = jobs.run_job(app, name)
    click.echo(f"{name}: {count}")


# --- pipelines ----------------------------------------------------------------------------

@main.command("report")
@click.option("--url", required=True, envvar="AGENTWATCH_URL", help="agentwatch base URL.")
@click.option("--token", required=True, envvar="AGENTWATCH_TOKEN", help="An agent token.")
@click.option("--type", "type_", required=True, help="Event type, e.g. gitops_sync_failed.")
@click.option("--commit", help="Commit SHA.")
@click.option("--project", help="Project the commit belongs to.")
@click.option("--message", help="What happened.")
@click.option("--link", help="An http(s) link, e.g. to the pipeline.")
def report_command(url: str, token: str, type_: str, commit: str | None, project: str | None,
                   message: str | None, link: str | None) -> None:
    """Record one event through the agent API (exit 0), or print the server's error."""
    from .reporter import ReportError, report
    try:
        result = report(url, token, {"type": type_, "commit": commit, "project": project,
                                     "message": message, "link": link})
    except ReportError as exc:
        raise click.ClickException(str(exc)) from None
    state = "already recorded" if result.get("duplicate") else "recorded"
    click.echo(f"event {result.get('id')} {state}")


# --- demo ---------------------------------------------------------------------------------

@main.command("demo")
@click.option("--kubeconfig", type=click.Path(dir_okay=False),
              help="Connect the demo agent to this cluster (e.g. the simulated one).")
@click.option("--context", help="Context in that kubeconfig.")
@click.option("--tunnel", is_flag=True,
              help="Reach the demo cluster through `agentwatch agent` instead (its token is "
                   "written to the instance folder, demo-agent-token).")
@with_appcontext
def demo_command(kubeconfig: str | None, context: str | None, tunnel: bool) -> None:
    """Seed a demo agent with a week of activity and print a login."""
    from . import demo
    demo.seed(echo=click.echo, kubeconfig=kubeconfig, context=context, tunnel=tunnel)


# --- the agent ----------------------------------------------------------------------------

@main.group("agent", invoke_without_command=True)
@click.option("--url", envvar="AGENTWATCH_AGENT_URL", help="agentwatch base URL "
              "($AGENTWATCH_AGENT_URL).")
@click.option("--token", envvar="AGENTWATCH_AGENT_TOKEN", help="The agent's token "
              "($AGENTWATCH_AGENT_TOKEN).")
@click.option("--kubeconfig", type=click.Path(dir_okay=False),
              help="Reach the cluster with this kubeconfig (default: the pod's service account).")
@click.option("--context", help="Context in that kubeconfig.")
@click.option("--ca-file", type=click.Path(dir_okay=False, exists=True),
              help="CA certificates (PEM) that verify the server's TLS certificate.")
@click.option("--impersonate-prefix", envvar="AGENTWATCH_AGENT_IMPERSONATE_PREFIX",
              help="Let agentwatch impersonate users and groups whose names begin with this "
                   "(e.g. agentwatch:, for access_as: user); by default it impersonates no "
                   "one ($AGENTWATCH_AGENT_IMPERSONATE_PREFIX).")
@click.option("--secrets", envvar="AGENTWATCH_AGENT_SECRETS", default="names",
              show_default=True, type=click.Choice(["names", "keys", "none"]),
              help="How much of Secrets the agent reads: names only (metadata, never a value), "
                   "keys too (values blanked by the agent) or none ($AGENTWATCH_AGENT_SECRETS).")
@click.option("--allow-exec", is_flag=True, envvar="AGENTWATCH_AGENT_ALLOW_EXEC",
              help="Open shells in containers when agentwatch asks (pods/exec); refused "
                   "otherwise, whatever the server asks ($AGENTWATCH_AGENT_ALLOW_EXEC).")
@click.option("--allow-apply", is_flag=True, envvar="AGENTWATCH_AGENT_ALLOW_APPLY",
              help="Forward Edit's and Create from YAML's server-side applies (any kind but "
                   "Secrets, as far as the agent's RBAC allows); refused otherwise "
                   "($AGENTWATCH_AGENT_ALLOW_APPLY).")
@click.pass_context
def agent_command(ctx: click.Context, url: str | None, token: str | None,
                  kubeconfig: str | None, context: str | None, ca_file: str | None,
                  impersonate_prefix: str | None, secrets: str, allow_exec: bool,
                  allow_apply: bool) -> None:
    """Run the agent: dial out to agentwatch and carry its requests to this cluster."""
    if ctx.invoked_subcommand is not None:
        return
    if not url or not token:
        raise click.UsageError("--url and --token (or $AGENTWATCH_AGENT_URL and "
                               "$AGENTWATCH_AGENT_TOKEN) are required")
    from .tunnel.run import run_agent
    from .tunnel.secret_reads import SecretReads
    try:
        run_agent(url, token, kubeconfig, context, ca_file, impersonate_prefix or None,
                  SecretReads(secrets), allow_exec=allow_exec, allow_apply=allow_apply)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None


@agent_command.command("manifest")
@click.argument("name")
@click.option("--url", help="The address the agent dials: agentwatch's public URL "
                            "(default: AGENTWATCH_BASE_URL).")
@click.option("--namespace", default="agentwatch", show_default=True)
@click.option("--replicas", type=click.IntRange(1, 10), default=2, show_default=True)
@click.option("--image", help="The agent's image, pulled by the cluster "
                              "(default: AGENTWATCH_AGENT_IMAGE).")
@click.option("--secrets", default="names", show_default=True,
              type=click.Choice(["names", "keys", "none"]),
              help="How much of Secrets the agent reads (and its ClusterRole grants).")
@click.option("--impersonate-prefix", default=None,
              help="Let the agent impersonate users and groups whose names begin with this, "
                   "and grant it impersonate (default: agentwatch: when the agent's "
                   "configuration says access_as: user, else no one; '' for no one).")
@click.option("--allow-exec", is_flag=True,
              help="Start the agent with --allow-exec and grant it pods/exec (shells in "
                   "containers, for the people user_access.exec names).")
@click.option("--allow-apply", is_flag=True,
              help="Start the agent with --allow-apply (Edit and Create from YAML); what it "
                   "may write is still the RBAC you grant it (docs/operate.md).")
@with_appcontext
def agent_manifest(name: str, url: str | None, namespace: str, replicas: int,
                   image: str | None, secrets: str, impersonate_prefix: str | None,
                   allow_exec: bool, allow_apply: bool) -> None:
    """Print the Kubernetes YAML that installs the agent NAME (with a new token)."""
    from datetime import UTC, datetime

    from .tunnel import impersonation, manifest
    from .tunnel.agent import tunnel_url
    from .tunnel.secret_reads import SecretReads
    from .watch import access, names
    url = url or str(current_app.config["BASE_URL"]).rstrip("/")
    image = image or manifest.image_of(current_app.config)
    try:
        tunnel_url(url)
        for warning in manifest.warnings(url, image):
            click.echo(f"warning: {warning}", err=True)
        names.namespace(namespace, "--namespace")
        if impersonate_prefix:
            impersonation.prefix(impersonate_prefix)
        agent = agents.get(name)
        if not agent.tunnel:
            raise click.ClickException(f"agent {name} does not use a tunnel; create it with "
                                       f"agentwatch agents create {name} --tunnel")
        if impersonate_prefix is None:
            impersonate_prefix = access.impersonate_prefix(agent)
        token_name = "agent-" + datetime.now(UTC).strftime("%Y%m%d%H%M%S")
        _, raw = tokens.create(agent, token_name, "cli")
    except AppError as exc:
        _fail(exc)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(manifest.render(name, url, raw, namespace=namespace, replicas=replicas,
                               image=image, impersonate_prefix=impersonate_prefix or None,
                               secrets=SecretReads(secrets), allow_exec=allow_exec,
                               allow_apply=allow_apply),
               nl=False)

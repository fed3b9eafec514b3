"""User administration (admins only)."""

from __future__ import annotations

from flask import Blueprint, flash, g, redirect, render_template, request, url_for
from werkzeug.wrappers import Response

from .. import users
from ..auth import role_required
from ..errors import AppError
from ..oidc import signin

bp = Blueprint("users", __name__, url_prefix="/users")


@bp.get("/")
@role_required("admin")
def index() -> str:
    return render_template("users/index.html", users=users.all_users(), error=None, form={},
                           providers=signin.providers_by_user())


@bp.post("/")
@role_required("admin")
def create() -> Response | tuple[str, int]:
    form = {k: request.form.get(k, "") for k in ("name", "role", "password")}
    try:
        users.create(form["name"].strip(), form["role"], form["password"], by=g.user.name)
    except AppError as exc:
        form.pop("password")
        return render_template("users/index.html", users=users.all_users(), error=exc.message,
                               form=form, providers=signin.providers_by_user()), exc.status
    flash(f"User {form['name']} created.")
    return redirect(url_for("users.index"))


@bp.post("/<name>/role")
@role_required("admin")
def set_role(name: str) -> Response:
    users.set_role(users.get(name), request.form.get("role", ""), by=g.user.name)
    flash(f"{name} is now {request.form.get('role')}.")
    return redirect(url_for("users.index"))


@bp.post("/<name>/delete")
@role_required("admin")
def delete(name: str) -> Response:
    user = users.get(name)
    if user.id == g.user.id:
        flash("You cannot delete yourself.")
        return redirect(url_for("users.index"))
    try:
        users.delete(user, by=g.user.name)
    except AppError as exc:
        flash(exc.message)
        return redirect(url_for("users.index"))
    flash(f"User {name} deleted.")
    return redirect(url_for("users.index"))

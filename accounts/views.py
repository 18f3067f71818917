from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from accounts import actions
from accounts.forms import TokenForm


def _page(request, form, *, new_key=None, status=200):
    tokens = request.user.personal_tokens.all()
    context = {"form": form, "tokens": tokens, "new_key": new_key}
    return render(request, "accounts/tokens.html", context, status=status)


@login_required
def tokens(request):
    if request.method != "POST":
        return _page(request, TokenForm())
    form = TokenForm(request.POST)
    if not form.is_valid():
        return _page(request, form, status=400)
    try:
        token, key = actions.create_token(
            request.user, name=form.cleaned_data["name"], days=form.cleaned_data["days"]
        )
    except actions.TokenError as exc:
        form.add_error(None, str(exc))
        return _page(request, form, status=400)
    # Rendered, not redirected: the key must not travel in a URL or a session.
    response = _page(request, TokenForm(), new_key=key)
    response["Cache-Control"] = "no-store"
    return response


@login_required
@require_POST
def revoke(request, pk):
    if actions.revoke_token(request.user, pk):
        messages.success(request, "Token revoked; it no longer works.")
    return redirect("tokens")

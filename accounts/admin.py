from django.contrib import admin

from accounts.models import PersonalToken


@admin.register(PersonalToken)
class PersonalTokenAdmin(admin.ModelAdmin):
    list_display = [
        "user",
        "name",
        "hint",
        "created_at",
        "expires_at",
        "last_used_at",
        "revoked_at",
    ]
    list_filter = ["revoked_at"]
    search_fields = ["user__username", "name"]
    readonly_fields = ["user", "name", "hint", "key_digest", "created_at", "last_used_at"]

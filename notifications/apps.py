from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    name = "notifications"
    verbose_name = "Notifications"

    def ready(self):
        from notifications import actions
        from teams import hooks

        # Everything people are told by mail goes to the webhooks too: a
        # delivery per hook, recorded in the transaction, sent on commit.
        hooks.on_notice(actions.notice_posted, many=actions.notices_posted)

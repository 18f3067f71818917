from django.apps import AppConfig


class BatchConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "batch"
    verbose_name = "Batch windows"

    def ready(self):
        from batch import actions, launch
        from gpu_requests import capacity
        from teams import hooks

        # A window's batch capacity is a reservation of its flavors, as approved quota is.
        capacity.register_reservations(actions.batch_reservations)
        # The team's namespace quota holds its released and running batch jobs.
        hooks.on_extra_quota(launch.running_allotment)
        # An archived team's queued, planned and running jobs are cancelled, and the
        # capacity they held planned again for others, in the archiving's transaction.
        hooks.on_team_archived(actions.team_archived)
        # A spent hard budget whose rule says so stops the team's running jobs.
        hooks.on_budget_spent(actions.stop_for_budget)

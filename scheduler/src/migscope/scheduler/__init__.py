"""``migscope schedule``: runs migscope jobs (analyze, apply) on cron schedules.

Each run is a child process (``migscope analyze ...``), so a job that crashes, leaks or hangs
cannot take the service with it, and a run on a schedule is exactly the command a person
would type.
"""

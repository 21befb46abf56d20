"""Found by the sqlq app in every installed app's tasks.py; run by `manage.py sqlq work`."""

import os

from sqlq.contrib.django import task

from .models import Order


@task(tube="orders", retries=2)
def confirm_order(order_id: int) -> dict[str, object]:
    order = Order.objects.get(id=order_id)
    order.status = "confirmed"
    order.save(update_fields=["status"])
    return {"order": order.id, "item": order.item, "worker": os.getpid()}

import json

from django.db import transaction
from django.http import Http404, HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

import sqlq
from sqlq.contrib.django import queue

from .models import Order
from .tasks import confirm_order


@csrf_exempt
@require_POST
@transaction.atomic
def place_order(request: HttpRequest) -> JsonResponse:
    order = Order.objects.create(item=request.GET.get("item", "book"))
    job = confirm_order.put(order.id)  # commits with the order (None: after its commit)
    return JsonResponse({"order": order.id, "job": job}, status=201)


@csrf_exempt
@require_POST
@transaction.atomic
def place_order_then_fail(request: HttpRequest) -> JsonResponse:
    order = Order.objects.create(item=request.GET.get("item", "book"))
    confirm_order.put(order.id)
    raise RuntimeError(f"order {order.id} failed after its job was put")  # rolls both back


def show_order(request: HttpRequest, order_id: int) -> JsonResponse:
    try:
        order = Order.objects.get(id=order_id)
    except Order.DoesNotExist:
        raise Http404("no such order") from None
    return JsonResponse({"order": order.id, "item": order.item, "status": order.status})


def show_job(request: HttpRequest, job_id: int) -> JsonResponse:
    try:
        result = queue.result(job_id, timeout=0)
    except sqlq.Timeout:
        return JsonResponse({"job": job_id, "state": "pending"})
    return JsonResponse({"job": job_id, "state": "done", "result": json.loads(result)})

from django.urls import path
from shop import views

urlpatterns = [
    path("orders", views.place_order),
    path("orders/broken", views.place_order_then_fail),
    path("orders/<int:order_id>", views.show_order),
    path("jobs/<int:job_id>", views.show_job),
]

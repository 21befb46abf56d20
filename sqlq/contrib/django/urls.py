"""``path("admin/sqlq/", include("sqlq.contrib.django.urls"))``: the read-only page."""

from __future__ import annotations

from django.urls import path

from . import views

app_name = "sqlq"
urlpatterns = [path("", views.overview, name="overview")]

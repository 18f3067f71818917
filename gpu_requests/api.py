from rest_framework import viewsets
from rest_framework.views import exception_handler as drf_exception_handler


def exception_handler(exc, context):
    return drf_exception_handler(exc, context)


class TeamViewSet(viewsets.ViewSet):
    pass


FlavorViewSet = QuotaRequestViewSet = TeamViewSet

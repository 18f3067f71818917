from django.http import HttpResponse


def dashboard(request):
    return HttpResponse("todo")


request_new = request_detail = review_queue = dashboard

"""The admin's login asks the sign-in lockout too (``buyers.forms``); its 429 is
answered by ``buyers.page_urls``, which serves the admin's login route."""

from django.contrib import admin

from .forms import AdminSignInForm

admin.site.login_form = AdminSignInForm

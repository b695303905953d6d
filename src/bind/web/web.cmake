# Sources of the HTTP side (see ../CMakeLists.txt; paths relative to src/bind): sealed values,
# wire formats, pages, the OIDC relying party, and the parts behind the routes.
list(APPEND KLUTCH_BIND_WEB_SOURCES
  web/sealer.cc web/web_protocol.cc web/web_html.cc web/identity_provider.cc web/oidc_client.cc
  web/web_responses.cc web/web_context.cc web/session_cookies.cc web/keyed_rate_limiter.cc
  web/consumer_binder.cc web/consumer_clusters.cc web/browser_login.cc web/device_flow.cc
  web/bind_endpoints.cc web/consumer_pages.cc web/web_backend.cc)

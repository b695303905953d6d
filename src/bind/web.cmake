# Sources of the HTTP side (see CMakeLists.txt): sealed values, wire formats, pages, the OIDC
# relying party and the routes.
list(APPEND KLUTCH_BIND_WEB_SOURCES web_seal.cc web_protocol.cc web_html.cc web_oidc.cc web.cc)

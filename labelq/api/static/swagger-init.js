// Starts Swagger UI on /docs (labelq/api/apidocs.py). A file, not the inline script of
// FastAPI's page: the docs page's policy allows scripts from this server only. The schema's
// URL is the page's (data-openapi-url); the options are FastAPI's defaults.
"use strict";
(function () {
  const root = document.getElementById("swagger-ui");
  window.ui = SwaggerUIBundle({
    url: root.dataset.openapiUrl,
    dom_id: "#swagger-ui",
    layout: "BaseLayout",
    deepLinking: true,
    showExtensions: true,
    showCommonExtensions: true,
    presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset],
  });
})();

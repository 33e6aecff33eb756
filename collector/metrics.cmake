# collector/metrics.cmake: Prometheus /metrics of a live session (metrics.h),
# served with libmicrohttpd. Included from collector/CMakeLists.txt.
pkg_check_modules(MHD IMPORTED_TARGET libmicrohttpd)
if(NOT MHD_FOUND)
  message(FATAL_ERROR "fsdpscope: libmicrohttpd not found (pkg-config libmicrohttpd): "
    "run scripts/setup.sh, or apt-get install libmicrohttpd-dev")
endif()
add_library(fss_metrics STATIC ${CMAKE_CURRENT_LIST_DIR}/metrics.c)
target_include_directories(fss_metrics PUBLIC ${CMAKE_CURRENT_LIST_DIR}/..)
target_compile_definitions(fss_metrics PRIVATE FSS_VERSION="${PROJECT_VERSION}")
target_link_libraries(fss_metrics PUBLIC fss_live fss_analysis fss_common PRIVATE PkgConfig::MHD)

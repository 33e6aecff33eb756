/*
 * viewer_render.c - a live view as one snapshot line of the viewer
 * protocol (docs/live.md, docs/live-schema.json): the view's field table
 * (live_fields.h) through the compact JSON writer.
 */
#include "collector/viewer.h"

#include "collector/live_fields.h"
#include "common/json_writer.h"

int viewer_render(const struct live_view *v, char **json, size_t *len)
{
	struct jw w;

	jw_init_buffer(&w, 1);
	jw_open(&w, NULL, '{');
	live_fields_write(&w, &live_table_snapshot, v, 1);
	jw_close(&w, '}');
	jw_raw(&w, "\n", 1);
	return jw_buffer_take(&w, json, len);
}

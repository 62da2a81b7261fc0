"""A stand-in desktop panel for the app's tray test, on the session bus of the test's
D-Bus session: it serves org.kde.StatusNotifierWatcher (what a panel's tray offers, so
libayatana-appindicator registers its StatusNotifierItem instead of falling back), and
reads and clicks an item's com.canonical.dbusmenu menu like a panel does when the user
opens it. Run with the system python (python3-gi): /usr/bin/python3 sni_host.py MODE ...

  serve                    own the watcher; print {"event": "ready"}, then one
                           {"event": "item", "bus": ..., "path": ...} per registration
  props BUS PATH           the item's Title, ToolTip title, Status and Menu path (JSON)
  layout BUS MENU          the menu as [{"id", "label", "enabled", "checked"}] (JSON)
  click BUS MENU LABEL     sends the "clicked" event to the item whose label starts with
                           LABEL (what a panel sends when the user picks it)
"""

import json
import sys

from gi.repository import Gio, GLib

WATCHER_XML = """
<node>
  <interface name="org.kde.StatusNotifierWatcher">
    <method name="RegisterStatusNotifierItem"><arg type="s" direction="in"/></method>
    <method name="RegisterStatusNotifierHost"><arg type="s" direction="in"/></method>
    <property name="RegisteredStatusNotifierItems" type="as" access="read"/>
    <property name="IsStatusNotifierHostRegistered" type="b" access="read"/>
    <property name="ProtocolVersion" type="i" access="read"/>
    <signal name="StatusNotifierItemRegistered"><arg type="s"/></signal>
    <signal name="StatusNotifierItemUnregistered"><arg type="s"/></signal>
    <signal name="StatusNotifierHostRegistered"/>
  </interface>
</node>
"""


def say(**kv):
    print(json.dumps(kv), flush=True)


def serve():
    bus = Gio.bus_get_sync(Gio.BusType.SESSION, None)
    node = Gio.DBusNodeInfo.new_for_xml(WATCHER_XML)
    items = []

    def method(conn, sender, path, iface, name, params, invocation):
        if name == "RegisterStatusNotifierItem":
            (service,) = params.unpack()
            if service.startswith("/"):
                owner, obj = sender, service
            else:
                owner, obj = service, "/StatusNotifierItem"
            items.append(f"{owner}{obj}")
            say(event="item", bus=owner, path=obj)
            conn.emit_signal(None, "/StatusNotifierWatcher", "org.kde.StatusNotifierWatcher",
                             "StatusNotifierItemRegistered", GLib.Variant("(s)", (f"{owner}{obj}",)))
        invocation.return_value(None)

    def get_property(conn, sender, path, iface, name):
        if name == "RegisteredStatusNotifierItems":
            return GLib.Variant("as", items)
        if name == "IsStatusNotifierHostRegistered":
            return GLib.Variant("b", True)
        if name == "ProtocolVersion":
            return GLib.Variant("i", 0)
        return None

    bus.register_object("/StatusNotifierWatcher", node.interfaces[0], method, get_property, None)

    def acquired(*_):
        say(event="ready")

    Gio.bus_own_name_on_connection(bus, "org.kde.StatusNotifierWatcher",
                                   Gio.BusNameOwnerFlags.NONE, acquired, None)
    GLib.MainLoop().run()


def call(bus_name, path, iface, method, args, reply):
    bus = Gio.bus_get_sync(Gio.BusType.SESSION, None)
    return bus.call_sync(bus_name, path, iface, method, args, GLib.VariantType(reply),
                         Gio.DBusCallFlags.NONE, 5000, None).unpack()


def props(bus_name, path):
    def get(name):
        # Not every item has every property (libayatana-appindicator has no ToolTip).
        try:
            (v,) = call(bus_name, path, "org.freedesktop.DBus.Properties", "Get",
                        GLib.Variant("(ss)", ("org.kde.StatusNotifierItem", name)), "(v)")
            return v
        except GLib.Error:
            return None
    tooltip = get("ToolTip")
    say(title=get("Title"), status=get("Status"), menu=get("Menu"),
        label=get("XAyatanaLabel"),
        tooltip=tooltip[2] if isinstance(tooltip, tuple) and len(tooltip) > 2 else tooltip)


def flatten(node, out):
    ident, properties, children = node
    label = properties.get("label")
    if label is not None:
        out.append({
            "id": ident,
            "label": label.replace("_", ""),
            "enabled": properties.get("enabled", True),
            "checked": properties.get("toggle-state", 0) == 1,
        })
    for child in children:
        flatten(child, out)
    return out


def layout(bus_name, menu):
    _rev, root = call(bus_name, menu, "com.canonical.dbusmenu", "GetLayout",
                      GLib.Variant("(iias)", (0, -1, [])), "(u(ia{sv}av))")
    return flatten(root, [])


def click(bus_name, menu, label):
    items = layout(bus_name, menu)
    match = [i for i in items if i["label"].startswith(label)]
    if not match:
        sys.exit(f"no menu item starting with {label!r}: {[i['label'] for i in items]}")
    call(bus_name, menu, "com.canonical.dbusmenu", "Event",
         GLib.Variant("(isvu)", (match[0]["id"], "clicked", GLib.Variant("i", 0), 0)), "()")
    say(clicked=match[0]["label"])


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "serve":
        serve()
    elif mode == "props":
        props(sys.argv[2], sys.argv[3])
    elif mode == "layout":
        say(items=layout(sys.argv[2], sys.argv[3]))
    elif mode == "click":
        click(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit(f"unknown mode {mode}")

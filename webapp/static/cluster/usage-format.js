// cluster/: usage-format.js: CPU and memory as `kubectl top` prints them (250m, 128Mi),
// shared by the lists' usage columns and the panel's usage.

export function cpuText(millicores) { return Math.round(millicores) + "m"; }

export function memoryText(bytes) { return Math.round(bytes / 1048576) + "Mi"; }

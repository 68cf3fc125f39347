/**
 * Durable file operations shared by the installer and the NAD mirror: atomic writes (temp +
 * fsync + rename + directory fsync), durable removal, content comparison; waiting for a file
 * another process writes.
 * @module
 */
export * from "./atomic.ts";
export * from "./wait_file.ts";

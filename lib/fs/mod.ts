/**
 * Durable file operations shared by the installer and the NAD mirror: atomic writes (temp +
 * fsync + rename + directory fsync), durable removal, content comparison.
 * @module
 */
export * from "./atomic.ts";

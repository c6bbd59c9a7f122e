"""The Qt front end. Talks to studio.engine; the engine never talks back to Qt."""

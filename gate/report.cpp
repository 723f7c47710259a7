namespace sa::gate {}
